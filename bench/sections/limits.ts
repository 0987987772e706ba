/**
 * Section "limits": concurrency limits hold while worker processes die. Three tenants with limits
 * 4, 8 and 6 (`FLOW_TENANT_LIMITS`, `FLOW_TENANT_CONCURRENCY`) create their runs (150 read steps of
 * the scripted model each) at once; three worker processes (`src/server/worker`, concurrency 20:
 * 60 slots, more than the limits together) run them, and every 1 to 3 s one of them, chosen at
 * random, is SIGKILLed and a fresh one started (3 kills with --quick, 6, 12 with --full-size). Every
 * 25 ms the bench reads from Redis the status of every run: the runs of a tenant whose status is
 * `running` are at work (admitted and started, not ended). The most ever seen at once, per tenant,
 * against its limit; the flow's own counter is sampled beside it. Every run must complete.
 */
import { round } from '../lib/stats.js';
import {
  atLeast,
  atMost,
  type BenchEnv,
  type BenchOptions,
  type Metric,
  type Section,
  type SectionResult,
} from '../lib/types.js';
import {
  createMany,
  flowContext,
  runStatuses,
  sleep,
  spawnFleetProcess,
  startFleet,
  stopFleet,
  stopProcess,
  waitAllEnded,
  type FleetProcess,
} from '../lib/flowFleet.js';
import type { EngineContext } from '../../src/runs/engineContext.js';

// Long enough that every kill lands while runs are at work on a quiet machine (360 runs of 20 steps ended in 6 s, before one kill).
const STEPS = 150;
const LIMITS: Record<string, number> = { 'tenant-a': 4, 'tenant-b': 8, 'tenant-c': 6 };
const FLEET_ENV = {
  FLOW_CONTROL: 'true',
  FLOW_TENANT_LIMITS: JSON.stringify({ 'tenant-a': 4, 'tenant-b': 8 }),
  FLOW_TENANT_CONCURRENCY: '6',
};

export const limits: Section = {
  name: 'limits',
  title: 'Concurrency limits under SIGKILL: 3 worker processes killed at random, runs at work sampled from Redis',
  async run(env: BenchEnv, opts: BenchOptions): Promise<SectionResult> {
    const perTenant = opts.quick ? 40 : opts.fullSize ? 300 : 120;
    const ctx = await flowContext(env, 'bench-limits', FLEET_ENV);
    await env.reset();
    const tenants = Object.keys(LIMITS);
    const tag = Date.now().toString(36);
    const runs: { runId: string; tenant: string }[] = [];
    for (const tenant of tenants) {
      const ids = Array.from({ length: perTenant }, (_, i) => `${tenant}-${tag}-${i}`);
      for (const r of await createMany(ctx, tenant, ids, { steps: STEPS })) runs.push({ runId: r.runId, tenant });
    }
    const t0 = Date.now();
    const fleet = await startFleet(env, ctx, 3, FLEET_ENV);
    const sampler = sampleAtWork(ctx, runs);
    let kills = 0;
    let statuses: string[];
    try {
      kills = await killAtRandom(env, ctx, fleet, runs, opts.quick ? 3 : opts.fullSize ? 12 : 6);
      statuses = await waitAllEnded(
        ctx,
        runs.map((r) => r.runId),
        300_000,
      );
    } finally {
      sampler.stop();
      await stopFleet(fleet);
    }
    const wallMs = Date.now() - t0;
    const seen = await sampler.done;
    const completed = statuses.filter((s) => s === 'completed').length;
    const metrics: Metric[] = [atLeast('completed', 'runs completed', completed, 'runs', runs.length)];
    for (const tenant of tenants)
      metrics.push(
        atMost(
          `${tenant}_max_at_work`,
          `most runs of ${tenant} at work at once (status running)`,
          seen.maxRunning[tenant] ?? 0,
          'runs',
          LIMITS[tenant]!,
          `flow counter max ${seen.maxCounter[tenant] ?? 0}`,
        ),
      );
    metrics.push({ key: 'kills', label: 'worker processes SIGKILLed', value: kills, unit: 'kills' });
    return {
      name: 'limits',
      title: this.title,
      metrics,
      details: {
        perTenant,
        steps: STEPS,
        limits: LIMITS,
        kills,
        samples: seen.samples,
        wallS: round(wallMs / 1000, 1),
        maxRunning: seen.maxRunning,
        maxCounter: seen.maxCounter,
        statuses: countBy(statuses),
      },
    };
  },
};

/**
 * SIGKILLs one of the three processes, chosen at random, every 1 to 3 s, and starts a fresh one in its place, `kills`
 * times or until every run has ended.
 */
async function killAtRandom(
  env: BenchEnv,
  ctx: EngineContext,
  fleet: FleetProcess[],
  runs: { runId: string }[],
  kills: number,
): Promise<number> {
  const ids = runs.map((r) => r.runId);
  for (let done = 0; done < kills; done++) {
    await sleep(1000 + Math.random() * 2000);
    const statuses = await runStatuses(ctx, ids);
    if (statuses.every((s) => s !== 'queued' && s !== 'running')) return done;
    const i = Math.floor(Math.random() * fleet.length);
    await stopProcess(fleet[i]!, 'SIGKILL');
    fleet[i] = spawnFleetProcess(env, FLEET_ENV);
  }
  return kills;
}

interface AtWork {
  maxRunning: Record<string, number>;
  maxCounter: Record<string, number>;
  samples: number;
}

/** Every 25 ms: each run's status (how many of each tenant are `running`) and the flow's per-tenant counters. */
function sampleAtWork(ctx: EngineContext, runs: { runId: string; tenant: string }[]) {
  const seen: AtWork = { maxRunning: {}, maxCounter: {}, samples: 0 };
  let stopped = false;
  const ids = runs.map((r) => r.runId);
  const done = (async () => {
    while (!stopped) {
      const [statuses, counters] = await Promise.all([
        runStatuses(ctx, ids),
        ctx.redis.hgetall(ctx.keys.flow().counts),
      ]);
      const running: Record<string, number> = {};
      statuses.forEach((s, i) => {
        if (s === 'running') running[runs[i]!.tenant] = (running[runs[i]!.tenant] ?? 0) + 1;
      });
      for (const [t, n] of Object.entries(running)) seen.maxRunning[t] = Math.max(seen.maxRunning[t] ?? 0, n);
      for (const t of Object.keys(LIMITS))
        seen.maxCounter[t] = Math.max(seen.maxCounter[t] ?? 0, Number(counters[`t:${t}`] ?? 0));
      seen.samples++;
      await sleep(25);
    }
    return seen;
  })();
  return {
    done,
    stop: () => {
      stopped = true;
    },
  };
}

function countBy(xs: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const x of xs) out[x] = (out[x] ?? 0) + 1;
  return out;
}
