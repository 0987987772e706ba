/**
 * Client-side command counter: every command any ioredis client of this process
 * sends (pipelined and MULTI commands one by one, a script call as one EVALSHA).
 * This is what a step costs in requests to Redis, without MONITOR. Installed by
 * patching Redis.prototype.sendCommand in the bench processes only.
 */
import { Redis } from 'ioredis';

const counts = new Map<string, number>();
let installed = false;
let total = 0;

export function installClientCounter(): void {
  if (installed) return;
  installed = true;
  const proto = Redis.prototype as unknown as { sendCommand(cmd: { name: string }, stream?: unknown): unknown };
  const original = proto.sendCommand;
  proto.sendCommand = function (this: unknown, cmd: { name: string }, stream?: unknown) {
    total++;
    counts.set(cmd.name, (counts.get(cmd.name) ?? 0) + 1);
    return original.call(this, cmd, stream);
  };
}

/** Commands sent so far by this process (all names). */
export function commandsSent(): number {
  return total;
}

export function clientCounts(): Record<string, number> {
  return Object.fromEntries(counts);
}

export function diffCounts(after: Record<string, number>, before: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) {
    const d = v - (before[k] ?? 0);
    if (d !== 0) out[k] = d;
  }
  return out;
}

export function sumCounts(c: Record<string, number>, exclude: readonly string[] = ['info']): number {
  return Object.entries(c).reduce((s, [k, v]) => (exclude.includes(k) ? s : s + v), 0);
}

export function addCounts(into: Record<string, number>, c: Record<string, number>): void {
  for (const [k, v] of Object.entries(c)) into[k] = (into[k] ?? 0) + v;
}
