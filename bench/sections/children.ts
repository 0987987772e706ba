/**
 * Section "children": what handing work to another agent costs (defineAgentTool), on one real worker process
 * loading the triage-refunds example (examples/triage-refunds), scripted with zero model latency.
 *
 * The same work two ways, one run at a time, pairs alternating: the refunds agent run alone (inline: check the
 * policy, answer: two steps), and a triage run that hands that refund to the refunds agent as a child run (the
 * hand-off step, the child's two steps, the triage's answer). The figure is each run's time from its `run_created`
 * event to its `completed` status event (stream ids, Redis time); the overhead is the difference of the medians:
 * the child's creation, the parent's park and wake, and the two steps of the parent around the child.
 *
 * And two refunds handed off two ways, in the same alternation: both in one turn (two children at once, one park
 * and one wake of the parent, its 2 steps) against one per turn (one child after the other, two parks and wakes,
 * its 3 steps): what starting children together saves.
 */
import { createContext } from '../../src/server/buildContext.js';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/metrics/log.js';
import { newMetrics } from '../../src/metrics/metrics.js';
import { buildSpec } from '../../src/producer/intake.js';
import { scriptSchema } from '../../src/models/scriptedTurns.js';
import type { EngineContext } from '../../src/runs/engineContext.js';
import { refunds, triageAgent } from '../../examples/triage-refunds/index.js';
import { spawnWorker } from '../../testkit/processes.js';
import { dist, round } from '../lib/stats.js';
import type { BenchEnv, BenchOptions, Section, SectionResult } from '../lib/types.js';
import { TENANT } from '../lib/workload.js';
import { moduleFile } from '../../testkit/spawnModule.js';
import { readAllEvents } from '../../src/store/runEvents.js';

const AGENTS_MODULE = moduleFile('examples/triage-refunds/index');
const ENDED = ['completed', 'failed', 'needs_human', 'budget_exceeded', 'cancelled'];

const idMs = (id: string): number => Number(id.split('-')[0]);

type Kind = 'inline' | 'child' | 'together' | 'one_by_one';
const usage = { promptTokens: 60, completionTokens: 10 };

/** A triage script handing two refunds off, both in one turn or one per turn, then answering. */
function twoRefunds(kind: 'together' | 'one_by_one', i: number) {
  const call = (n: number) => ({
    name: 'hand_to_refunds',
    args: { orderId: `O-${kind}-${i}-${n}`, amountCents: 20_00, reason: 'broken mug' },
  });
  const turns =
    kind === 'together'
      ? [{ toolCalls: [call(0), call(1)], usage }]
      : [
          { toolCalls: [call(0)], usage },
          { toolCalls: [call(1)], usage },
        ];
  return scriptSchema.parse([...turns, { toolCalls: [], final: 'both handled', usage }]);
}

async function start(ctx: EngineContext, kind: Kind, i: number): Promise<string> {
  const order = { orderId: `O-${kind}-${i}`, amountCents: 20_00 };
  const triageInput = { ticketId: `T-${kind}-${i}`, text: 'broken mug', ...order };
  const request =
    kind === 'inline'
      ? { tenant: TENANT, agent: 'refunds', input: { ...order, reason: 'broken mug' }, model: 'scripted' }
      : kind === 'child'
        ? { tenant: TENANT, agent: 'triage', input: triageInput, model: 'scripted' }
        : { tenant: TENANT, agent: 'triage', input: triageInput, model: 'scripted', script: twoRefunds(kind, i) };
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
  const ev = await readAllEvents(ctx.redis, ctx.keys.run(runId));
  const created = ev.find((e) => e.type === 'run_created');
  const done = ev.find((e) => e.type === 'status_changed' && e.data.includes('"completed"'));
  if (!created || !done) throw new Error(`run ${runId}: no run_created or completed event`);
  return idMs(done.entry) - idMs(created.entry);
}

async function pairs(ctx: EngineContext, n: number): Promise<Record<Kind, number[]>> {
  const out: Record<Kind, number[]> = { inline: [], child: [], together: [], one_by_one: [] };
  for (let i = 0; i < n; i++) {
    // Alternating which goes first, so a drift of the machine lands on both of each pair.
    const order: Kind[][] = [
      ['inline', 'child'],
      ['together', 'one_by_one'],
    ];
    for (const pair of order) {
      for (const kind of i % 2 === 0 ? pair : [...pair].reverse())
        out[kind].push(await runMs(ctx, await start(ctx, kind, i)));
    }
  }
  return out;
}

async function run(env: BenchEnv, opts: BenchOptions): Promise<SectionResult> {
  await env.reset();
  const n = opts.quick ? 5 : 10 * Math.max(1, Math.min(opts.rounds, 3));
  const appEnv = { ...env.appEnv, AGENTS_MODULE };
  const cfg = loadConfig(appEnv);
  const ctx = await createContext(cfg, 'bench-children', {
    // The worker process builds the same agents from the module's settings (the desk: the bench's sandbox).
    agents: [triageAgent({ baseUrl: env.sandbox.url, token: 'sandbox-token' }), refunds],
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
    const together = dist(r.together);
    const oneByOne = dist(r.one_by_one);
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
        {
          key: 'two_children_together_p50_ms',
          label: 'triage run handing two refunds off in one turn (2 children at once), p50',
          value: round(together.p50, 1),
          unit: 'ms',
          note,
        },
        {
          key: 'two_children_one_by_one_p50_ms',
          label: 'the same two handed off one per turn, p50',
          value: round(oneByOne.p50, 1),
          unit: 'ms',
          note,
        },
      ],
      tables: [
        {
          title: 'distributions (ms)',
          header: ['what', 'n', 'p50', 'p99', 'max'],
          rows: [
            ['inline', inline.n, round(inline.p50, 1), round(inline.p99, 1), round(inline.max, 1)],
            ['child run', child.n, round(child.p50, 1), round(child.p99, 1), round(child.max, 1)],
            [
              'two children in one turn',
              together.n,
              round(together.p50, 1),
              round(together.p99, 1),
              round(together.max, 1),
            ],
            [
              'two children one per turn',
              oneByOne.n,
              round(oneByOne.p50, 1),
              round(oneByOne.p99, 1),
              round(oneByOne.max, 1),
            ],
          ],
        },
      ],
      details: { inlineMs: r.inline, childMs: r.child, togetherMs: r.together, oneByOneMs: r.one_by_one },
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
