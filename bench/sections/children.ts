/**
 * Section "children": what handing work to another agent costs (defineAgentTool), on one real worker process
 * loading the triage-refunds example (examples/triage-refunds), scripted with zero model latency.
 *
 * The same work two ways, one run at a time, pairs alternating: the refunds agent run alone (inline: check the
 * policy, answer: two steps), and a triage run that hands that refund to the refunds agent as a child run (the
 * hand-off step, the child's two steps, the triage's answer). The figure is each run's time from its `run_created`
 * event to its `completed` status event (stream ids, Redis time); the overhead is the difference of the medians:
 * the child's creation, the parent's park and wake, and the two steps of the parent around the child.
 */
import { createContext } from '../../src/server/buildContext.js';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/metrics/log.js';
import { newMetrics } from '../../src/metrics/metrics.js';
import { buildSpec } from '../../src/producer/intake.js';
import type { EngineContext } from '../../src/runs/engineContext.js';
import { refunds, triage } from '../../examples/triage-refunds/index.js';
import { spawnWorker } from '../../testkit/processes.js';
import { dist, round } from '../lib/stats.js';
import type { BenchEnv, BenchOptions, Section, SectionResult } from '../lib/types.js';
import { TENANT } from '../lib/workload.js';

const AGENTS_MODULE = 'examples/triage-refunds/index.ts';
const ENDED = ['completed', 'failed', 'needs_human', 'budget_exceeded', 'cancelled'];

const idMs = (id: string): number => Number(id.split('-')[0]);

async function start(ctx: EngineContext, kind: 'inline' | 'child', i: number): Promise<string> {
  const order = { orderId: `O-${kind}-${i}`, amountCents: 20_00 };
  const request =
    kind === 'inline'
      ? { tenant: TENANT, agent: 'refunds', input: { ...order, reason: 'broken mug' }, model: 'scripted' }
      : {
          tenant: TENANT,
          agent: 'triage',
          input: { ticketId: `T-${kind}-${i}`, text: 'broken mug', ...order },
          model: 'scripted',
        };
  const spec = buildSpec(ctx, request, Date.now());
  if (!(await ctx.store.create(spec, Date.now()))) throw new Error(`run ${spec.runId} already existed`);
  return spec.runId;
}

/** The run's time from its creation to its completion, by its events, once it completed. */
async function runMs(ctx: EngineContext, runId: string): Promise<number> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const s = (await ctx.redis.hget(ctx.keys.run(runId).run, 'status')) ?? '';
    if (s === 'completed') break;
    if (ENDED.includes(s) || Date.now() > deadline) throw new Error(`run ${runId} is '${s}', not completed`);
    await new Promise((r) => setTimeout(r, 5));
  }
  const ev = await ctx.redis.xrange(ctx.keys.run(runId).events, '-', '+');
  const created = ev.find(([, f]) => f[1] === 'run_created');
  const done = ev.find(([, f]) => f[1] === 'status_changed' && f[3]?.includes('"completed"'));
  if (!created || !done) throw new Error(`run ${runId}: no run_created or completed event`);
  return idMs(done[0]) - idMs(created[0]);
}

async function pairs(ctx: EngineContext, n: number): Promise<{ inline: number[]; child: number[] }> {
  const out = { inline: [] as number[], child: [] as number[] };
  for (let i = 0; i < n; i++) {
    // Alternating which goes first, so a drift of the machine lands on both.
    const order = i % 2 === 0 ? (['inline', 'child'] as const) : (['child', 'inline'] as const);
    for (const kind of order) out[kind].push(await runMs(ctx, await start(ctx, kind, i)));
  }
  return out;
}

async function run(env: BenchEnv, opts: BenchOptions): Promise<SectionResult> {
  await env.reset();
  const n = opts.quick ? 5 : 10 * Math.max(1, Math.min(opts.rounds, 3));
  const appEnv = { ...env.appEnv, AGENTS_MODULE };
  const cfg = loadConfig(appEnv);
  const ctx = await createContext(cfg, 'bench-children', {
    agents: [triage, refunds],
    log: createLogger('bench-children', cfg.LOG_LEVEL),
    metrics: newMetrics(),
  });
  env.onCleanup(() => ctx.close());
  const worker = await spawnWorker({ ...appEnv, WORKER_METRICS_PORT: '0' }, { keep: 'lifecycle' });
  env.onCleanup(() => {
    if (!worker.dead) worker.child.kill('SIGKILL');
  });
  try {
    const r = await pairs(ctx, n);
    const inline = dist(r.inline);
    const child = dist(r.child);
    const note = `${inline.n} runs each, one at a time, alternating`;
    return {
      name: 'children',
      title: 'A child run against the same work inline (one worker process, triage-refunds example, scripted)',
      metrics: [
        {
          key: 'inline_run_p50_ms',
          label: 'refunds run alone (2 steps), p50',
          value: round(inline.p50, 1),
          unit: 'ms',
          note,
        },
        {
          key: 'child_run_p50_ms',
          label: 'triage run handing it to a child (2 + 2 steps), p50',
          value: round(child.p50, 1),
          unit: 'ms',
          note,
        },
        {
          key: 'child_overhead_p50_ms',
          label: 'overhead of the child run, p50',
          value: round(child.p50 - inline.p50, 1),
          unit: 'ms',
        },
      ],
      tables: [
        {
          title: 'distributions (ms)',
          header: ['what', 'n', 'p50', 'p99', 'max'],
          rows: [
            ['inline', inline.n, round(inline.p50, 1), round(inline.p99, 1), round(inline.max, 1)],
            ['child run', child.n, round(child.p50, 1), round(child.p99, 1), round(child.max, 1)],
          ],
        },
      ],
      details: { inlineMs: r.inline, childMs: r.child },
    };
  } finally {
    worker.child.kill('SIGTERM');
    await worker.exited;
  }
}

export const children: Section = {
  name: 'children',
  title: 'A child run against the same work inline',
  run,
};
