/** A process's own CPU, read from /proc (Linux). */
import { readFileSync } from 'node:fs';

/** CPU seconds (user + system) a process has used so far, from /proc/<pid>/stat (clock ticks of 10 ms). */
export function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  // After "pid (comm) ", utime and stime are fields 12 and 13 (0-based, counting from the state field).
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Resident memory of a process now, bytes, from /proc/<pid>/stat (its rss field, in pages of 4 KiB). */
export function residentBytes(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  // rss is field 24 of the whole line: 21, 0-based, counting from the state field.
  return Number(fields[21]) * 4096;
}
