/**
 * Redis-side cost without MONITOR: snapshots of INFO commandstats + stats + cpu
 * and their deltas. The snapshot's own INFO command and bytes are excluded
 * (commands by name; bytes by a calibration of back-to-back snapshots).
 */
import type { Redis } from 'ioredis';

export interface CmdStat {
  calls: number;
  usec: number;
}

export interface RedisSnapshot {
  cmds: Map<string, CmdStat>;
  netIn: number;
  netOut: number;
  /** Redis process CPU seconds (user + sys), all threads. */
  cpu: number;
  /** AOF size (bytes), 0 when AOF is off. */
  aof: number;
}

export interface RedisDelta {
  /** Commands executed (INFO excluded): a script counts once (evalsha) plus once per redis.call() inside it. */
  calls: number;
  /** Commands executed outside scripts plus scripts themselves: commandstats usec (a script's usec includes its redis.call()s). */
  scriptUsec: number;
  netIn: number;
  netOut: number;
  cpuUs: number;
  aofBytes: number;
  byCommand: Record<string, CmdStat>;
}

export async function snapshot(admin: Redis): Promise<RedisSnapshot> {
  const text = (await admin.call('INFO', 'commandstats', 'stats', 'cpu', 'persistence')) as string;
  const cmds = new Map<string, CmdStat>();
  let netIn = 0;
  let netOut = 0;
  let cpu = 0;
  let aof = 0;
  for (const line of text.split('\r\n')) {
    if (line.startsWith('cmdstat_')) {
      const m = /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/.exec(line);
      if (m) cmds.set(m[1]!, { calls: Number(m[2]), usec: Number(m[3]) });
    } else if (line.startsWith('total_net_input_bytes:')) netIn = Number(line.split(':')[1]);
    else if (line.startsWith('total_net_output_bytes:')) netOut = Number(line.split(':')[1]);
    else if (line.startsWith('used_cpu_sys:') || line.startsWith('used_cpu_user:')) cpu += Number(line.split(':')[1]);
    else if (line.startsWith('aof_current_size:')) aof = Number(line.split(':')[1]);
  }
  return { cmds, netIn, netOut, cpu, aof };
}

const EXCLUDED = new Set(['info']);

export interface Calibration {
  netIn: number;
  netOut: number;
  cpuUs: number;
}

export function delta(
  a: RedisSnapshot,
  b: RedisSnapshot,
  calib: Calibration = { netIn: 0, netOut: 0, cpuUs: 0 },
): RedisDelta {
  const byCommand: Record<string, CmdStat> = {};
  let calls = 0;
  let scriptUsec = 0;
  for (const [name, s] of b.cmds) {
    if (EXCLUDED.has(name)) continue;
    const before = a.cmds.get(name) ?? { calls: 0, usec: 0 };
    const d = { calls: s.calls - before.calls, usec: s.usec - before.usec };
    if (d.calls === 0) continue;
    byCommand[name] = d;
    calls += d.calls;
    if (SCRIPT_COMMANDS.has(name)) scriptUsec += d.usec;
  }
  return {
    calls,
    scriptUsec,
    byCommand,
    netIn: b.netIn - a.netIn - calib.netIn,
    netOut: b.netOut - a.netOut - calib.netOut,
    cpuUs: (b.cpu - a.cpu) * 1e6 - calib.cpuUs,
    aofBytes: b.aof - a.aof,
  };
}

/** What one snapshot adds to the next delta: its request in, the previous reply out, the CPU of INFO itself. */
export async function calibrate(admin: Redis, samples = 20): Promise<Calibration> {
  let prev = await snapshot(admin);
  let netIn = 0;
  let netOut = 0;
  const cpu: number[] = [];
  for (let i = 0; i < samples; i++) {
    const next = await snapshot(admin);
    netIn += next.netIn - prev.netIn;
    netOut += next.netOut - prev.netOut;
    cpu.push((next.cpu - prev.cpu) * 1e6);
    prev = next;
  }
  cpu.sort((x, y) => x - y);
  return { netIn: netIn / samples, netOut: netOut / samples, cpuUs: cpu[Math.floor(samples / 2)] ?? 0 };
}

/** Commands a client sends itself (scripts count once); the rest are redis.call()s inside scripts. */
export const SCRIPT_COMMANDS = new Set(['evalsha', 'eval', 'fcall', 'evalsha_ro', 'eval_ro']);

/** Top commands by time (a script's time includes the commands it runs). */
export function topCommands(d: RedisDelta, per: number, n = 8): { name: string; callsPer: number; usecPer: number }[] {
  return Object.entries(d.byCommand)
    .map(([name, s]) => ({ name, callsPer: s.calls / per, usecPer: s.usec / per }))
    .sort((x, y) => y.usecPer - x.usecPer)
    .slice(0, n);
}
