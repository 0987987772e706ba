/**
 * Section "priority": a run created with priority 4 behind a line of normal runs of the same tenant
 * (tenant limit 10, six read steps each, two worker processes). Right before it is created the bench
 * reads the tenant's waiting runs, right after it the runs holding a slot: the runs in the first set
 * and not in the second had not started when the urgent run arrived and were still waiting once it
 * was in line. From then every 5 ms the bench reads the held slots (each records when its run was
 * admitted, `admittedAt`); none of those waiting runs may have been admitted before the urgent run.
 */
import { round } from '../lib/stats.js';
import {
  atMost,
  type BenchEnv,
  type BenchOptions,
  type Metric,
  type Section,
  type SectionResult,
} from '../lib/types.js';
import {
  createFlowRun,
  createMany,
  flowContext,
  runTimeline,
  sleep,
  startFleet,
  stopFleet,
  waitAllEnded,
} from '../lib/flowFleet.js';
import type { EngineContext } from '../../src/runs/engineContext.js';

const STEPS = 6;
const TENANT = 'tenant-p';
const FLEET_ENV = { FLOW_CONTROL: 'true', FLOW_TENANT_CONCURRENCY: '10' };

export const priority: Section = {
  name: 'priority',
  title: 'Priority: an urgent run created behind a line of normal runs of the same tenant (limit 10)',
  async run(env: BenchEnv, opts: BenchOptions): Promise<SectionResult> {
    const normal = opts.quick ? 300 : 1000;
    const ctx = await flowContext(env, 'bench-priority', FLEET_ENV);
    await env.reset();
    const flow = ctx.keys.flow();
    const fleet = await startFleet(env, ctx, 2, FLEET_ENV);
    const tag = Date.now().toString(36);
    let result: { admitted: Map<string, number>; waited: Set<string>; urgent: string; createdAt: number };
    try {
      await createMany(
        ctx,
        TENANT,
        Array.from({ length: normal }, (_, i) => `N-${tag}-${i}`),
        { steps: STEPS },
      );
      const waitingBefore = await ctx.redis.hkeys(flow.waiting);
      const admitted = new Map<string, number>();
      const sampler = sampleHeld(ctx, admitted);
      const urgent = await createFlowRun(ctx, TENANT, `U-${tag}`, { steps: STEPS, priority: 4 });
      const heldAfter = new Set(await ctx.redis.hkeys(flow.held));
      const waited = new Set(waitingBefore.filter((id) => !heldAfter.has(id)));
      await waitAllEnded(ctx, [urgent.runId], 120_000);
      await sleep(200);
      sampler.stop();
      await sampler.done;
      result = { admitted, waited, urgent: urgent.runId, createdAt: urgent.createdAt };
    } finally {
      await stopFleet(fleet);
    }
    const urgentAt = result.admitted.get(result.urgent);
    if (urgentAt === undefined) throw new Error('the urgent run was never seen holding a slot');
    const overtaken = [...result.waited].filter((id) => (result.admitted.get(id) ?? Infinity) < urgentAt);
    const sameRound = [...result.waited].filter((id) => result.admitted.get(id) === urgentAt).length;
    const timeline = await runTimeline(ctx, result.urgent);
    const metrics: Metric[] = [
      atMost('overtaken', 'waiting normal runs admitted before the urgent run', overtaken.length, 'runs', 0),
      {
        key: 'waited',
        label: 'normal runs waiting when the urgent run was created',
        value: result.waited.size,
        unit: 'runs',
      },
      {
        key: 'urgent_admitted_ms',
        label: 'urgent run: create -> admitted',
        value: urgentAt - result.createdAt,
        unit: 'ms',
        note: `first step ${round(timeline.firstStepAt - result.createdAt)} ms, end ${round(timeline.endedAt - result.createdAt)} ms`,
      },
    ];
    return {
      name: 'priority',
      title: this.title,
      metrics,
      details: { normal, steps: STEPS, waited: result.waited.size, overtaken, admittedInSameRound: sameRound },
    };
  },
};

/** Every 5 ms: every held slot's run and when it was admitted (its `admittedAt`), first sight kept. */
function sampleHeld(ctx: EngineContext, admitted: Map<string, number>) {
  let stopped = false;
  const done = (async () => {
    while (!stopped) {
      const held = await ctx.redis.hgetall(ctx.keys.flow().held);
      for (const [runId, raw] of Object.entries(held)) {
        if (admitted.has(runId)) continue;
        const at = (JSON.parse(raw) as { admittedAt?: number }).admittedAt;
        if (at !== undefined) admitted.set(runId, at);
      }
      await sleep(5);
    }
  })();
  return {
    done,
    stop: () => {
      stopped = true;
    },
  };
}
