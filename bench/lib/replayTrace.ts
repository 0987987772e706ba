/**
 * Replays a MONITOR trace (monitorTrace.ts) into a redis-server of its own, one connection, in the trace's order:
 * the same commands on the same keys reach the same state and give the same replies, so the server's cost of a
 * bench round can be measured again and again without the workers, and with one script swapped for a variant.
 * Under callgrind the measure is the instructions the server executes, which do not depend on what else the
 * machine is doing; without it, the server's CPU time (INFO cpu).
 *
 * What a replay leaves out: blocking commands (a worker's wait for its next job: on one connection a blocked
 * command would stall the replay, and its wake-up is not in the trace), the bench's own INFO and AOF rewrites,
 * connection, script-cache and function-library commands (every script and library is loaded before the replay; an
 * EVAL becomes its EVALSHA).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { embeddedServerArgs, freePort } from '../../testkit/embeddedRedis.js';
import type { TracedCommand } from './monitorTrace.js';

/** The commands of one bench round: what builds its start state, and what it measured (between its INFO reads). */
export interface TracedRound {
  prefix: TracedCommand[];
  window: TracedCommand[];
}

const name = (c: TracedCommand) => c.args[0]!.toString('latin1').toUpperCase();
const SNAPSHOT = 'INFO commandstats stats cpu persistence'; // bench/lib/redisInfo.ts snapshot()
const isSnapshot = (c: TracedCommand) => c.args.map((a) => a.toString('latin1')).join(' ') === SNAPSHOT;

/**
 * Splits a trace of runRound calls (workload.ts) into rounds: each starts at its reset's FLUSHALL, and measures from
 * its first snapshot to its second.
 */
export function splitRounds(trace: TracedCommand[]): TracedRound[] {
  const rounds: TracedRound[] = [];
  let current: TracedCommand[] | undefined;
  const close = () => {
    if (!current) return;
    const snaps = current.flatMap((c, i) => (isSnapshot(c) ? [i] : []));
    if (snaps.length !== 2) throw new Error(`a traced round has ${snaps.length} INFO snapshots, expected 2`);
    rounds.push({ prefix: current.slice(0, snaps[0]), window: current.slice(snaps[0]! + 1, snaps[1]) });
  };
  for (const c of trace) {
    if (name(c) === 'FLUSHALL') {
      close();
      current = [];
    }
    current?.push(c);
  }
  close();
  return rounds;
}

const sha1 = (body: Buffer | string) => createHash('sha1').update(body).digest('hex');

/** Every script body the trace sent (EVAL, SCRIPT LOAD), by sha. */
export function scriptBodies(trace: TracedCommand[]): Map<string, Buffer> {
  const bodies = new Map<string, Buffer>();
  for (const c of trace) {
    const n = name(c);
    const body =
      n === 'EVAL'
        ? c.args[1]
        : n === 'SCRIPT' && c.args[1]?.toString().toUpperCase() === 'LOAD'
          ? c.args[2]
          : undefined;
    if (body) bodies.set(sha1(body), body);
  }
  return bodies;
}

const SKIPPED = new Set([
  'INFO', 'BGREWRITEAOF', 'MONITOR', 'SCRIPT', 'FUNCTION', 'CLIENT', 'HELLO', 'PING', 'QUIT', 'CONFIG', 'SELECT', 'READONLY',
  'BZPOPMIN', 'BZPOPMAX', 'BLPOP', 'BRPOP', 'BRPOPLPUSH', 'BLMOVE', 'BLMPOP', 'BZMPOP', 'WAIT',
  'SUBSCRIBE', 'PSUBSCRIBE', 'UNSUBSCRIBE', 'PUNSUBSCRIBE',
]); // prettier-ignore

export interface ReplayResult {
  sent: number;
  errors: number;
  /** Script replies that are a negative number: a fenced or refused call (a faithful replay has as many as the round). */
  refused: number;
  firstErrors: string[];
}

/**
 * Sends the commands, 64 at a time on one connection (replies in order, so the server sees the trace's order), EVAL
 * turned into EVALSHA and script shas (or library function names) swapped as `swap` says; calls of the scripts in
 * `drop` (shas or function names) are left out.
 */
export async function replay(
  client: Redis,
  commands: TracedCommand[],
  swap: ReadonlyMap<string, string> = new Map(),
  drop: ReadonlySet<string> = new Set(),
): Promise<ReplayResult> {
  const result: ReplayResult = { sent: 0, errors: 0, refused: 0, firstErrors: [] };
  const ready: Buffer[][] = [];
  for (const c of commands) {
    const n = name(c);
    if (SKIPPED.has(n)) continue;
    if ((n === 'XREAD' || n === 'XREADGROUP') && c.args.some((a) => a.toString('latin1').toUpperCase() === 'BLOCK'))
      continue;
    let args = c.args;
    if (n === 'EVAL') args = [Buffer.from('EVALSHA'), Buffer.from(sha1(args[1]!)), ...args.slice(2)];
    // A script by its sha, a library function by its name: either may be swapped for a variant's.
    if (n === 'EVAL' || n === 'EVALSHA' || n === 'FCALL') {
      if (drop.has(args[1]!.toString())) continue;
      const to = swap.get(args[1]!.toString());
      if (to) args = [args[0]!, Buffer.from(to), ...args.slice(2)];
    }
    ready.push(args);
  }
  for (let i = 0; i < ready.length; i += 64) {
    await Promise.all(
      ready.slice(i, i + 64).map(async (args) => {
        result.sent++;
        try {
          const reply = await client.callBuffer(args[0]!.toString(), ...args.slice(1));
          if (typeof reply === 'number' && reply < 0 && /^(evalsha|fcall)$/i.test(args[0]!.toString()))
            result.refused++;
        } catch (e) {
          result.errors++;
          if (result.firstErrors.length < 3) result.firstErrors.push(`${args[0]!.toString()}: ${(e as Error).message}`);
        }
      }),
    );
  }
  return result;
}

export interface ReplayServer {
  client: Redis;
  /** Loads script bodies and function libraries (`#!lua name=...`): all a trace and its variants use. */
  load(bodies: Iterable<Buffer | string>): Promise<void>;
  /** Server CPU seconds so far (INFO cpu, user + sys). */
  cpuSeconds(): Promise<number>;
  /** Under callgrind: counts instructions from on(true) to on(false); a no-op otherwise. */
  count(on: boolean): Promise<void>;
  /** Stops the server; under callgrind, the instructions counted. */
  stop(): Promise<number | undefined>;
}

/** redis-server as the bench runs it (testkit/embeddedRedis.ts: AOF everysec, noeviction, listpack values to 1 KB). */
export async function startReplayServer(opts: { callgrind?: boolean; outFile?: string } = {}): Promise<ReplayServer> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'agent-replay-'));
  const serverArgs = embeddedServerArgs(port, dir, { appendfsync: 'everysec' });
  const child: ChildProcess = opts.callgrind
    ? spawn(
        'valgrind',
        [
          '--tool=callgrind',
          '--instr-atstart=no',
          `--callgrind-out-file=${opts.outFile ?? join(dir, 'callgrind.out')}`,
          'redis-server',
          ...serverArgs,
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      )
    : spawn('redis-server', serverArgs, { stdio: 'ignore' });
  let log = '';
  child.stderr?.on('data', (d: Buffer) => (log += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const client = new Redis(port, '127.0.0.1', {
    maxRetriesPerRequest: null,
    retryStrategy: (n) => (n > 400 ? null : 50),
  });
  client.on('error', () => {});
  await client.ping().catch((e: Error) => {
    child.kill('SIGKILL');
    throw new Error(`replay server did not start: ${e.message} ${log.slice(-500)}`);
  });
  const control = async (on: boolean) => {
    if (!opts.callgrind) return;
    const c = spawn('callgrind_control', ['-i', on ? 'on' : 'off', String(child.pid)], { stdio: 'ignore' });
    const code = await new Promise<number | null>((resolve) => c.once('exit', resolve));
    if (code !== 0) throw new Error(`callgrind_control -i ${on ? 'on' : 'off'} exited ${code}`);
  };
  return {
    client,
    async load(bodies) {
      for (const b of bodies) {
        if (b.toString().startsWith('#!lua name=')) await client.call('FUNCTION', 'LOAD', 'REPLACE', b);
        else await client.call('SCRIPT', 'LOAD', b);
      }
    },
    async cpuSeconds() {
      const info = await client.info('cpu');
      return [...info.matchAll(/used_cpu_(?:user|sys):([\d.]+)/g)].reduce((s, m) => s + Number(m[1]), 0);
    },
    count: control,
    async stop() {
      await client.call('SHUTDOWN', 'NOSAVE').catch(() => undefined);
      client.disconnect();
      await exited;
      let instructions: number | undefined;
      if (opts.callgrind) {
        const file = opts.outFile ?? join(dir, 'callgrind.out');
        const totals = /^totals: (\d+)/m.exec(readFileSync(file, 'utf8'));
        if (!totals) throw new Error(`no callgrind totals in ${dir}: ${log.slice(-500)}`);
        instructions = Number(totals[1]);
      }
      rmSync(dir, { recursive: true, force: true });
      return instructions;
    },
  };
}

export { sha1 };
