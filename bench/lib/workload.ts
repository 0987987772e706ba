/**
 * Workloads: engine runs (scripted model, zero latency) and plain chains, and
 * one measured round of either through a worker pool.
 */
import type { Script } from '../../src/models/scriptedTurns.js';
import { buildSpec } from '../../src/producer/intake.js';
import type { EngineContext } from '../../src/runs/engineContext.js';
import { plainQueue, seedChains, PLAIN_QUEUE } from '../plainChain.js';
import type { WorkerPool } from './pool.js';
import type { ChildRoundStats, WorkKind } from './protocol.js';
import { delta, snapshot, type RedisDelta } from './redisInfo.js';
import { addCounts } from './clientCounter.js';
import type { BenchEnv } from './types.js';

export const TENANT = 'bench';
export const USAGE = { promptTokens: 100, completionTokens: 10 };

const readTurn = { toolCalls: [{ name: 'read_ticket', args: {} }], usage: USAGE, transientFailures: 0 };
const finalTurn = { toolCalls: [], final: 'done', usage: USAGE, transientFailures: 0 };

/** steps-1 read_ticket turns then a final answer: `steps` step jobs. */
export function readOnlyScript(steps: number): Script {
  return [...Array.from({ length: steps - 1 }, () => readTurn), finalTurn];
}

/** Like readOnlyScript, with step `effectStep` a send_email through the ledger. */
export function oneEffectScript(steps: number, email: string, effectStep = 2): Script {
  const s = readOnlyScript(steps);
  s[effectStep - 1] = {
    toolCalls: [
      {
        name: 'send_email',
        args: { to: email, template: 'ack', subject: 'We got your ticket', body: 'Thanks, we are on it.' },
      },
    ],
    usage: USAGE,
    transientFailures: 0,
  };
  return s;
}

export function ticket(id: string, body = 'The mug was shattered when I opened the box.') {
  return {
    id,
    subject: 'My order arrived broken',
    body,
    customer: { email: `c-${id.toLowerCase().replace(/[^a-z0-9]/g, '')}@example.com`, name: 'Ada' },
  };
}

/** Creates a run through the producer path (buildSpec + RunStore.create); returns its id. */
export async function createRun(
  ctx: EngineContext,
  ticketId: string,
  script: Script,
  opts: { maxSteps: number; body?: string; maxTokens?: number },
): Promise<string> {
  const t = ticket(ticketId, opts.body);
  const spec = buildSpec(
    ctx,
    {
      tenant: TENANT,
      ticket: t,
      budget: { maxSteps: opts.maxSteps, maxTokens: opts.maxTokens ?? 5_000_000 },
      agent: { model: 'scripted', script },
    },
    Date.now(),
  );
  if (!(await ctx.store.create(spec, Date.now()))) throw new Error(`run for ${ticketId} already existed`);
  return spec.runId;
}

export type RoundKind = 'plain' | 'engine' | 'effects';

export interface RoundSpec {
  kind: RoundKind;
  chains: number;
  steps: number;
  recordLatency?: boolean;
  /** Unique per round (ticket ids, so no worker cache carries over). */
  tag: string;
  /** Creates an engine run (default: createRun, straight into the queue); returns its id. */
  create?: (ticketId: string, script: Script, maxSteps: number) => Promise<string>;
  timeoutMs?: number;
}

export interface RoundResult {
  kind: RoundKind;
  chains: number;
  steps: number;
  jobs: number;
  wallMs: number;
  /** Of it, the time after the last step's completion until the compactor packed the round's last run (0: none). */
  packTailMs: number;
  stepsPerSec: number;
  /**
   * The fleet's Node CPU per step (sum over the worker processes and the compactor's, which packs the runs the round
   * ended: src/runs/compactor.ts), µs.
   */
  nodeCpuUsPerStep: number;
  /** Of it, the worker processes' main threads (ChildRoundStats.mainUs), the compactor's left out. */
  nodeMainUsPerStep: number;
  /** Of it, the compactor's. */
  compactorCpuUsPerStep: number;
  /** Redis CPU per step, µs. */
  redisCpuUsPerStep: number;
  /** Requests the workers sent to Redis per step. */
  clientCmdsPerStep: number;
  /** Commands Redis executed per step (inside scripts included). */
  redisCallsPerStep: number;
  redisBytesPerStep: number;
  /** Bytes appended to the AOF per step. */
  aofBytesPerStep: number;
  clientByCommand: Record<string, number>;
  redis: RedisDelta;
  latencies: number[];
  /** Per chain, time between consecutive completions (only meaningful when chains run alone). */
  periods: number[];
  children: Omit<ChildRoundStats, 'latencies' | 'completedAt'>[];
}

/** Runs one round: reset Redis, create the work, prepare workers, time go -> last completion, verify. */
export async function runRound(env: BenchEnv, pool: WorkerPool, spec: RoundSpec): Promise<RoundResult> {
  await env.reset();
  const jobs = spec.chains * spec.steps;
  const ids = Array.from({ length: spec.chains }, (_, i) => `${spec.tag}-${spec.kind}-${i}`);
  let runIds: string[] = [];
  const kind: WorkKind = spec.kind === 'plain' ? 'plain' : 'engine';
  if (spec.kind === 'plain') {
    const q = plainQueue(env.ctx.redis, env.cfg, PLAIN_QUEUE);
    await seedChains(q, ids, spec.steps);
    await q.close();
  } else {
    runIds = await Promise.all(
      ids.map((id) => {
        const script =
          spec.kind === 'effects' ? oneEffectScript(spec.steps, ticket(id).customer.email) : readOnlyScript(spec.steps);
        return spec.create
          ? spec.create(id, script, spec.steps + 10)
          : createRun(env.ctx, id, script, { maxSteps: spec.steps + 10 });
      }),
    );
  }
  await pool.prepare({ kind, queueName: PLAIN_QUEUE, recordLatency: spec.recordLatency ?? false });
  const before = await snapshot(env.admin);
  await pool.go();
  const goAt = pool.goAt;
  let lastAt: number;
  let stats: ChildRoundStats[] = [];
  try {
    lastAt = await pool.waitFor(jobs, spec.timeoutMs ?? 120_000);
  } finally {
    // Always close the round's workers, also when it failed.
    stats = await pool.finish().catch(() => []);
  }
  const after = await snapshot(env.admin);
  const failed = stats.reduce((s, c) => s + c.failed, 0);
  if (failed > 0)
    throw new Error(`${spec.kind} round: ${failed} jobs failed: ${stats.flatMap((c) => c.failures).join('; ')}`);
  await verify(env, spec, runIds);

  // A round ends when its work is done: its last step, and the last of its runs packed by the compactor (the worker
  // packed them before its step's job completed when it compacted them itself).
  const packedAt = Math.max(0, ...stats.filter((c) => c.role === 'compactor').map((c) => c.lastAt));
  const wallMs = Math.max(lastAt, packedAt) - goAt;
  const redis = delta(before, after);
  const clientByCommand: Record<string, number> = {};
  for (const c of stats) addCounts(clientByCommand, c.byCommand);
  const latencies = stats.flatMap((c) => c.latencies ?? []);
  const periods: number[] = [];
  if (spec.chains === 1) {
    const times = stats.flatMap((c) => c.completedAt ?? []).sort((a, b) => a - b);
    for (let i = 1; i < times.length; i++) periods.push(times[i]! - times[i - 1]!);
  }
  return {
    kind: spec.kind,
    chains: spec.chains,
    steps: spec.steps,
    jobs,
    wallMs,
    packTailMs: Math.max(0, packedAt - lastAt),
    stepsPerSec: (jobs / wallMs) * 1000,
    nodeCpuUsPerStep: stats.reduce((s, c) => s + c.cpuUs, 0) / jobs,
    nodeMainUsPerStep: stats.filter((c) => c.role === 'worker').reduce((s, c) => s + c.mainUs, 0) / jobs,
    compactorCpuUsPerStep: stats.filter((c) => c.role === 'compactor').reduce((s, c) => s + c.cpuUs, 0) / jobs,
    redisCpuUsPerStep: redis.cpuUs / jobs,
    clientCmdsPerStep: stats.reduce((s, c) => s + c.commandsSent, 0) / jobs,
    redisCallsPerStep: redis.calls / jobs,
    redisBytesPerStep: (redis.netIn + redis.netOut) / jobs,
    aofBytesPerStep: redis.aofBytes / jobs,
    clientByCommand,
    redis,
    latencies,
    periods,
    children: stats.map(({ latencies: _l, completedAt: _c, ...rest }) => rest),
  };
}

async function verify(env: BenchEnv, spec: RoundSpec, runIds: string[]): Promise<void> {
  if (spec.kind === 'plain') return;
  const statuses = await Promise.all(runIds.map((id) => env.ctx.redis.hget(env.ctx.keys.run(id).run, 'status')));
  const bad = statuses.filter((s) => s !== 'completed');
  if (bad.length > 0)
    throw new Error(
      `${spec.kind} round: ${bad.length} of ${runIds.length} runs did not complete (${[...new Set(bad)].join(', ')})`,
    );
  if (spec.kind === 'effects') {
    const counts = env.sandbox.counts();
    const emails = counts.byResource.emails.records;
    if (emails !== runIds.length || counts.duplicates !== 0) {
      throw new Error(`effects round: ${emails} emails for ${runIds.length} runs, ${counts.duplicates} duplicates`);
    }
  }
}

export interface WarmUpResult {
  cycles: number;
  /** steps/s per cycle, per kind. */
  history: Record<string, number[]>;
  /** Worker CPU µs per step per cycle, per kind (the settling criterion). */
  cpuHistory: Record<string, number[]>;
  stable: boolean;
}

/**
 * JIT warm-up: a fresh worker process needs several thousand steps before its
 * cost per step settles (measured: 640 -> 230 µs of worker CPU per engine step
 * over the first 5 rounds of 2,000 steps). Runs cycles of every kind until each
 * kind's worker CPU per step of the last two cycles agree within `tolerance`
 * (CPU per step, unlike steps/s, hardly moves with outside load on the machine);
 * at least minCycles, at most maxCycles.
 */
export async function warmUp(
  env: BenchEnv,
  pool: WorkerPool,
  kinds: RoundKind[],
  size: { chains: number; steps: number },
  opts: { minCycles: number; maxCycles: number; tolerance?: number; tag: string },
): Promise<WarmUpResult> {
  const tol = opts.tolerance ?? 0.15;
  const history: Record<string, number[]> = Object.fromEntries(kinds.map((k) => [k, [] as number[]]));
  const cpuHistory: Record<string, number[]> = Object.fromEntries(kinds.map((k) => [k, [] as number[]]));
  let cycles = 0;
  const settled = () =>
    kinds.every((k) => {
      const h = cpuHistory[k]!;
      if (h.length < 2) return false;
      const a = h[h.length - 2]!;
      const b = h[h.length - 1]!;
      return Math.abs(b / a - 1) <= tol;
    });
  while (cycles < opts.maxCycles) {
    for (const kind of kinds) {
      const r = await runRound(env, pool, { kind, ...size, tag: `${opts.tag}w${cycles}` });
      history[kind]!.push(Math.round(r.stepsPerSec));
      cpuHistory[kind]!.push(Math.round(r.nodeCpuUsPerStep));
    }
    cycles++;
    if (cycles >= opts.minCycles && settled()) break;
  }
  return { cycles, history, cpuHistory, stable: settled() };
}
