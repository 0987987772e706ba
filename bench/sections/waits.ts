/**
 * Section "waits": what the agent features that do more cost in time, on one real worker process
 * (src/server/worker.ts) and the built-in support agent's tools, scripted:
 *
 *  1. Parallel tool calls: a run whose step asks for three knowledge-base reads in one turn, against the same
 *     reads one per turn (three steps), each read held 200 ms by the sandbox (`slow_commit` on `kb`). The figure
 *     is the run's time from its `run_created` event to its `completed` status event (both stream ids, Redis
 *     time), pairs alternating; the final step is in both.
 *  2. Event delivery to resumed step: a run parks `waiting_event` (wait_for_reply, on its ticket's reply key);
 *     the bench delivers the event through the API's delivery function (src/producer/events.ts: the key's
 *     script, then the wake job promoted) and takes the `woke` event's stream id (written by the wake job's
 *     first script, at the start of the resumed step) minus the time just before the delivery. One at a time.
 *  3. Sleep wake time to step start: runs sleep 1 s (check_back_later), started 150 ms apart; the figure is the
 *     `woke` event's `lateMs` (the wake job's start minus the sleep's wake time).
 */
import { deliver } from '../../src/producer/events.js';
import { replyKey } from '../../src/agents/support/tools/waitForReply.js';
import type { Script } from '../../src/models/scriptedTurns.js';
import { spawnWorker } from '../../testkit/processes.js';
import { dist, round, type Dist } from '../lib/stats.js';
import type { BenchEnv, BenchOptions, Metric, Section, SectionResult } from '../lib/types.js';
import { createRun, TENANT, USAGE } from '../lib/workload.js';
import { readAllEvents, type RunEvent } from '../../src/store/runEvents.js';

const READ_MS = 200;
const SLEEP_MS = 1000;
const SLEEP_STAGGER_MS = 150;

const turn = (toolCalls: { name: string; args: Record<string, unknown> }[]) => ({
  toolCalls,
  usage: USAGE,
  transientFailures: 0,
});
const finalTurn = { toolCalls: [], final: 'done', usage: USAGE, transientFailures: 0 };
const kb = (q: string) => ({ name: 'search_kb', args: { query: q } });
const QUERIES = ['broken mug', 'refund policy', 'shipping times'];

const parallelScript: Script = [turn(QUERIES.map(kb)), finalTurn];
const sequentialScript: Script = [...QUERIES.map((q) => turn([kb(q)])), finalTurn];

async function events(env: BenchEnv, runId: string): Promise<RunEvent[]> {
  return readAllEvents(env.ctx.redis, env.ctx.keys.run(runId));
}

const idMs = (id: string): number => Number(id.split('-')[0]);

/** Polls the run's status (5 ms) until it is one of `statuses`. */
async function statusOf(env: BenchEnv, runId: string, statuses: string[], timeoutMs = 30_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = (await env.ctx.redis.hget(env.ctx.keys.run(runId).run, 'status')) ?? '';
    if (statuses.includes(s)) return s;
    if (Date.now() > deadline) throw new Error(`run ${runId} stayed '${s}', expected ${statuses.join('|')}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

const ENDED = ['completed', 'failed', 'needs_human', 'budget_exceeded', 'cancelled'];

async function finished(env: BenchEnv, runId: string): Promise<void> {
  const s = await statusOf(env, runId, ENDED);
  if (s !== 'completed') throw new Error(`run ${runId} ended ${s}`);
}

/** A run's time from its creation to its completion, by its events (Redis time). */
async function runMs(env: BenchEnv, runId: string): Promise<number> {
  const ev = await events(env, runId);
  const created = ev.find((e) => e.type === 'run_created');
  const done = ev.find((e) => e.type === 'status_changed' && e.data.includes('"completed"'));
  if (!created || !done) throw new Error(`run ${runId}: no run_created or completed event`);
  return idMs(done.entry) - idMs(created.entry);
}

async function parallelVsSequential(env: BenchEnv, pairs: number): Promise<{ par: number[]; seq: number[] }> {
  env.sandbox.setFaults([{ kind: 'slow_commit', resource: 'kb', ms: READ_MS }]);
  const par: number[] = [];
  const seq: number[] = [];
  try {
    for (let i = 0; i < pairs; i++) {
      // Alternating which goes first, so a drift of the machine lands on both.
      const order = i % 2 === 0 ? (['par', 'seq'] as const) : (['seq', 'par'] as const);
      for (const kind of order) {
        const script = kind === 'par' ? parallelScript : sequentialScript;
        const runId = await createRun(env.ctx, `WP-${kind}-${i}`, script, { maxSteps: 10 });
        await finished(env, runId);
        (kind === 'par' ? par : seq).push(await runMs(env, runId));
      }
    }
  } finally {
    env.sandbox.clearFaults();
  }
  return { par, seq };
}

async function deliveryToStep(env: BenchEnv, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const ticketId = `WE-${i}`;
    const script: Script = [turn([{ name: 'wait_for_reply', args: { hours: 1 } }]), finalTurn];
    const runId = await createRun(env.ctx, ticketId, script, { maxSteps: 10 });
    await statusOf(env, runId, ['waiting_event']);
    const t0 = Date.now();
    const r = await deliver(env.ctx, {
      tenant: TENANT,
      agent: 'support',
      key: replyKey(ticketId),
      payload: { message: 'yes' },
    });
    if (r.kind !== 'resumed') throw new Error(`delivery to ${runId}: ${r.kind}`);
    await finished(env, runId);
    const woke = (await events(env, runId)).find((e) => e.type === 'woke');
    if (!woke) throw new Error(`run ${runId}: no woke event`);
    out.push(idMs(woke.entry) - t0);
  }
  return out;
}

async function sleepToStep(env: BenchEnv, n: number): Promise<number[]> {
  const script: Script = [turn([{ name: 'check_back_later', args: { hours: SLEEP_MS / 3600_000 } }]), finalTurn];
  const runIds: string[] = [];
  for (let i = 0; i < n; i++) {
    runIds.push(await createRun(env.ctx, `WS-${i}`, script, { maxSteps: 10 }));
    await new Promise((r) => setTimeout(r, SLEEP_STAGGER_MS));
  }
  const out: number[] = [];
  for (const runId of runIds) {
    await finished(env, runId);
    const woke = (await events(env, runId)).find((e) => e.type === 'woke');
    if (!woke) throw new Error(`run ${runId}: no woke event`);
    out.push((JSON.parse(woke.data) as { lateMs: number }).lateMs);
  }
  return out;
}

const ms = (key: string, label: string, value: number, note?: string): Metric => ({
  key,
  label,
  value: round(value, 1),
  unit: 'ms',
  ...(note ? { note } : {}),
});

const distRow = (what: string, d: Dist) => [what, d.n, round(d.p50, 1), round(d.p99, 1), round(d.max, 1)];

async function run(env: BenchEnv, opts: BenchOptions): Promise<SectionResult> {
  await env.reset();
  const n = opts.quick ? 5 : 10 * Math.max(1, Math.min(opts.rounds, 5));
  const worker = await spawnWorker({ ...env.appEnv, WORKER_METRICS_PORT: '0' }, { keep: 'lifecycle' });
  env.onCleanup(() => {
    if (!worker.dead) worker.child.kill('SIGKILL');
  });
  try {
    const { par, seq } = await parallelVsSequential(env, Math.max(3, Math.round(n / 2)));
    const event = dist(await deliveryToStep(env, n));
    const sleep = dist(await sleepToStep(env, n));
    const p = dist(par);
    const s = dist(seq);
    const note = `three ${READ_MS} ms kb reads; ${p.n} runs each, alternating`;
    return {
      name: 'waits',
      title: 'Parallel tool calls and durable waits (one worker process, support agent tools, scripted)',
      metrics: [
        ms('parallel_run_p50_ms', 'run with the three reads in one step, p50', p.p50, note),
        ms('sequential_run_p50_ms', 'run with the three reads one per step, p50', s.p50, note),
        ms('event_to_step_p50_ms', 'event delivered -> resumed step starts, p50', event.p50),
        ms('event_to_step_p99_ms', 'event delivered -> resumed step starts, p99', event.p99, `${event.n} runs`),
        ms('sleep_to_step_p50_ms', "sleep's wake time -> step starts, p50", sleep.p50),
        ms('sleep_to_step_p99_ms', "sleep's wake time -> step starts, p99", sleep.p99, `${sleep.n} runs`),
      ],
      tables: [
        {
          title: 'distributions (ms)',
          header: ['what', 'n', 'p50', 'p99', 'max'],
          rows: [
            distRow('run, reads in one step', p),
            distRow('run, reads one per step', s),
            distRow('event -> step', event),
            distRow('sleep wake -> step', sleep),
          ],
        },
      ],
      details: { parallelMs: par, sequentialMs: seq, eventToStep: event, sleepToStep: sleep },
    };
  } finally {
    worker.child.kill('SIGTERM');
    await worker.exited;
  }
}

export const waits: Section = {
  name: 'waits',
  title: 'Parallel tool calls and durable waits',
  run,
};
