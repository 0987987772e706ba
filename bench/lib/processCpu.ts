/** A process's own CPU, read from /proc (Linux). */
import { readFileSync } from 'node:fs';

/** CPU seconds (user + system) a process has used so far, from /proc/<pid>/stat (clock ticks of 10 ms). */
export function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  // After "pid (comm) ", utime and stime are fields 12 and 13 (0-based, counting from the state field).
  return (Number(fields[11]) + Number(fields[12])) / 100;
}
