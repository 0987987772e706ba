/** A process's own CPU and memory, read from /proc (Linux). */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

export interface ProcStat {
  /** CPU seconds (user + system) the process has used so far. */
  cpuSeconds: number;
  /** Its resident memory now, bytes. */
  residentBytes: number;
}

/** The system's own units, read once, before any process is measured: utime and stime count clock ticks, rss pages. */
const system = (name: string): number => Number(execFileSync('getconf', [name], { encoding: 'utf8' }).trim());
const TICKS_PER_SECOND = system('CLK_TCK');
const PAGE_BYTES = system('PAGESIZE');

/** One read of /proc/<pid>/stat: the process's CPU so far and its resident memory. */
export function procStat(pid: number): ProcStat {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  // After "pid (comm) ", counting from the state field (0-based): utime 11, stime 12, rss 21 (in pages).
  return {
    cpuSeconds: (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND,
    residentBytes: Number(fields[21]) * PAGE_BYTES,
  };
}

/** CPU seconds (user + system) a process has used so far. */
export const cpuSeconds = (pid: number): number => procStat(pid).cpuSeconds;
