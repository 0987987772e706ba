/**
 * What the flow-control sections share: a context with the flow settings a section chooses, real
 * worker processes (`src/server/worker`, the same entry point as `npm run worker`) started with
 * those settings and stopped (or SIGKILLed) by the section, runs of the scripted model created
 * through the producer path (`startRun`: under flow control, into the tenant's line), and each run's
 * timeline read back from its event stream (the stream id of an event is the Redis time it was
 * written, in ms).
 */
import type { ChildProcess } from 'node:child_process';
import { loadConfig } from '../../src/config/config.js';
import { createContext } from '../../src/server/buildContext.js';
import { createLogger } from '../../src/metrics/log.js';
import { newMetrics } from '../../src/metrics/metrics.js';
import { startRun } from '../../src/producer/intake.js';
import type { EngineContext } from '../../src/runs/engineContext.js';
import { spawnModule } from '../../testkit/spawnModule.js';
import { readOnlyScript, ticket } from './workload.js';
import type { BenchEnv } from './types.js';
import { readAllEvents } from '../../src/store/runEvents.js';

/** Statuses a run ends in (anything else is still at work or waiting). */
export const ENDED = new Set(['completed', 'failed', 'budget_exceeded', 'cancelled', 'needs_human']);

/** A context in the bench process with `extra` over the bench's env (closed at the end). */
export async function flowContext(env: BenchEnv, name: string, extra: Record<string, string>): Promise<EngineContext> {
  const cfg = loadConfig({ ...env.appEnv, ...extra });
  const ctx = await createContext(cfg, name, { log: createLogger(name, cfg.LOG_LEVEL), metrics: newMetrics() });
  env.onCleanup(() => ctx.close());
  return ctx;
}

export interface FleetProcess {
  child: ChildProcess;
  exited: Promise<void>;
}

/**
 * Starts `n` worker processes with `extra` over the bench's env and waits until the shard queue
 * sees them all (BullMQ's worker registry, CLIENT LIST): the fleet is ready before anything is measured.
 */
export async function startFleet(
  env: BenchEnv,
  ctx: EngineContext,
  n: number,
  extra: Record<string, string>,
): Promise<FleetProcess[]> {
  const before = await ctx.queues.byShard(0).getWorkersCount();
  const procs = Array.from({ length: n }, () => spawnFleetProcess(env, extra));
  const deadline = Date.now() + 60_000;
  while ((await ctx.queues.byShard(0).getWorkersCount()) < before + n) {
    const dead = procs.find((p) => p.child.exitCode !== null || p.child.signalCode !== null);
    if (dead) throw new Error(`worker process ${dead.child.pid} exited while starting`);
    if (Date.now() > deadline) throw new Error(`${n} worker processes did not start within 60 s`);
    await sleep(50);
  }
  return procs;
}

export function spawnFleetProcess(env: BenchEnv, extra: Record<string, string>): FleetProcess {
  const child = spawnModule('src/server/worker', { ...env.appEnv, WORKER_METRICS_PORT: '0', ...extra }, [
    'ignore',
    'ignore',
    'inherit',
  ]);
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  env.onCleanup(() => stopProcess({ child, exited }, 'SIGKILL'));
  return { child, exited };
}

/** SIGTERM (the worker hands its jobs back and exits) or SIGKILL; resolves when the process is gone. */
export async function stopProcess(p: FleetProcess, signal: 'SIGTERM' | 'SIGKILL' = 'SIGTERM'): Promise<void> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return;
  p.child.kill(signal);
  const t = setTimeout(() => p.child.kill('SIGKILL'), 10_000);
  await p.exited;
  clearTimeout(t);
}

export async function stopFleet(procs: FleetProcess[]): Promise<void> {
  await Promise.all(procs.map((p) => stopProcess(p)));
}

/**
 * Creates a run through the producer path; returns its id and the create time (epoch ms). `steps` read steps of the
 * scripted model, or `model` (e.g. 'openai': the support agent with that provider, no script).
 */
export async function createFlowRun(
  ctx: EngineContext,
  tenant: string,
  id: string,
  run: { steps?: number; priority?: number; model?: string },
): Promise<{ runId: string; createdAt: number }> {
  const createdAt = Date.now();
  const agent =
    run.model !== undefined
      ? { agent: { model: run.model } }
      : {
          budget: { maxSteps: (run.steps ?? 1) + 2 },
          agent: { model: 'scripted', script: readOnlyScript(run.steps ?? 1) },
        };
  const r = await startRun(
    ctx,
    { tenant, ticket: ticket(id), ...agent, ...(run.priority ? { priority: run.priority } : {}) },
    `k-${id}`,
    createdAt,
  );
  if (!r.created) throw new Error(`run ${id} already existed`);
  return { runId: r.runId, createdAt };
}

/** Creates `ids.length` runs with at most `parallel` creations in flight (a burst, as a busy producer sends it). */
export async function createMany(
  ctx: EngineContext,
  tenant: string,
  ids: string[],
  run: { steps?: number; model?: string },
  parallel = 50,
): Promise<{ runId: string; createdAt: number }[]> {
  const out: { runId: string; createdAt: number }[] = new Array(ids.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(parallel, ids.length) }, async () => {
      while (next < ids.length) {
        const i = next++;
        out[i] = await createFlowRun(ctx, tenant, ids[i]!, run);
      }
    }),
  );
  return out;
}

/**
 * Polls the runs' statuses until every one has ended; returns them. Throws past `timeoutMs` naming how many were left
 * and where the first few stand (status, cursor, their current job's state).
 */
export async function waitAllEnded(ctx: EngineContext, runIds: string[], timeoutMs: number): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const statuses = await runStatuses(ctx, runIds);
    const left = runIds.filter((_, i) => !ENDED.has(statuses[i]!));
    if (left.length === 0) return statuses;
    if (Date.now() > deadline) {
      const where = await Promise.all(
        left.slice(0, 3).map(async (runId) => {
          const [status, cursor, jobId] = await ctx.redis.hmget(ctx.keys.run(runId).run, 'status', 'cursor', 'jobId');
          const job = jobId ? await ctx.queues.forRun(runId).getJobState(jobId) : 'none';
          return `${runId} ${status} cursor ${cursor} job ${jobId} ${job}`;
        }),
      );
      throw new Error(
        `${left.length} of ${runIds.length} runs had not ended after ${timeoutMs} ms: ${where.join('; ')}`,
      );
    }
    await sleep(200);
  }
}

export async function runStatuses(ctx: EngineContext, runIds: string[]): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < runIds.length; i += 1000) {
    const p = ctx.redis.pipeline();
    for (const id of runIds.slice(i, i + 1000)) p.hget(ctx.keys.run(id).run, 'status');
    const res = (await p.exec()) ?? [];
    for (const [, v] of res) out.push(typeof v === 'string' ? v : '');
  }
  return out;
}

export interface RunTimeline {
  /** Epoch ms of the first step_started event, of the event that ended the run (NaN when missing). */
  firstStepAt: number;
  endedAt: number;
  status: string;
}

/** A run's first step and end, from the ids of its events (Redis server time, ms). */
export async function runTimeline(ctx: EngineContext, runId: string): Promise<RunTimeline> {
  const events = await readAllEvents(ctx.redis, ctx.keys.run(runId));
  let firstStepAt = Number.NaN;
  let endedAt = Number.NaN;
  let status = '';
  for (const { entry, type, data } of events) {
    const at = Number(entry.split('-')[0]);
    if (type === 'step_started' && Number.isNaN(firstStepAt)) firstStepAt = at;
    if (type === 'status_changed') {
      const s = (JSON.parse(data || '{}') as { status?: string }).status ?? '';
      if (ENDED.has(s)) {
        endedAt = at;
        status = s;
      }
    }
  }
  return { firstStepAt, endedAt, status };
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
