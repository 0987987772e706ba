/**
 * Section "neighbour": a noisy neighbour, with flow control off and on. Tenant A creates a burst of
 * runs at once (50 creations in flight); tenant B then creates one run every 300 ms. Every run is
 * six read steps of the scripted model; two worker processes (`src/server/worker`, concurrency 20).
 * B's time from create to its first step and to its end (p50, p99) against B alone on an idle
 * fleet. Flow control is on by default: B alone and the fleet the targets are for are started with no flow
 * setting at all (the default tenant limit, 50 runs at work at once, more than the fleet's 40 worker slots), so
 * a fresh deployment is what passes. Flow control off (`FLOW_CONTROL=false`) is the queue as it was before
 * admission (first come, first served, step by step); the other fleets change one limit: 20 (half the slots) and
 * none (A's whole burst admitted at once, its step jobs fill the queue); each also with FLOW_STEP_PRIORITY=false
 * (admission by turns, but the admitted runs' step jobs in one first-come-first-served line: what flow control was
 * before step jobs were ordered by their tenant's share, src/flow/stepPriority.ts). */
import { dist, round, type Dist } from '../lib/stats.js';
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
const B_EVERY_MS = 300;
const WORKERS = 2;

/**
 * The fleets compared: B alone, flow control off, on as shipped (no flow setting given), on with half the fleet's
 * slots or no tenant limit. Only the settings a fleet changes are named; flow control on is the default.
 */
const MODES = [
  { key: 'idle', label: 'idle (B alone, no flow setting)', env: {}, burst: false },
  { key: 'off', label: 'flow off (FLOW_CONTROL=false)', env: { FLOW_CONTROL: 'false' }, burst: true },
  { key: 'on', label: 'flow on by default (no flow setting), tenant limit 50', env: {}, burst: true },
  {
    key: 'onfifo',
    label: 'flow on, tenant limit 50, steps first come first served',
    env: { FLOW_STEP_PRIORITY: 'false' },
    burst: true,
  },
  {
    key: 'on20',
    label: 'flow on, tenant limit 20',
    env: { FLOW_TENANT_CONCURRENCY: '20' },
    burst: true,
  },
  {
    key: 'on20fifo',
    label: 'flow on, tenant limit 20, steps first come first served',
    env: { FLOW_TENANT_CONCURRENCY: '20', FLOW_STEP_PRIORITY: 'false' },
    burst: true,
  },
  {
    key: 'on0',
    label: 'flow on, no tenant limit',
    env: { FLOW_TENANT_CONCURRENCY: '0' },
    burst: true,
  },
  {
    key: 'on0fifo',
    label: 'flow on, no tenant limit, steps first come first served',
    env: { FLOW_TENANT_CONCURRENCY: '0', FLOW_STEP_PRIORITY: 'false' },
    burst: true,
  },
] as const;
type Mode = (typeof MODES)[number];

interface ModeResult {
  first: Dist;
  end: Dist;
  /** A's burst: creation time, and create start -> last run ended. */
  burstCreateMs?: number;
  burstDrainMs?: number;
}

export const neighbour: Section = {
  name: 'neighbour',
  title: 'Noisy neighbour: tenant B behind tenant A’s burst, flow control off and on (2 worker processes)',
  async run(env: BenchEnv, opts: BenchOptions): Promise<SectionResult> {
    // The worker processes inherit this process's environment: a flow setting there would make "the default"
    // something else.
    const inherited = Object.keys(process.env).filter((k) => k.startsWith('FLOW_'));
    if (inherited.length > 0)
      throw new Error(`the neighbour section measures flow control's defaults: unset ${inherited.join(', ')}`);
    const burst = opts.quick ? 300 : opts.fullSize ? 5000 : 1500;
    const bRuns = opts.quick ? 10 : 25;
    const results: Record<string, ModeResult> = {};
    for (const mode of MODES) {
      const ctx = await flowContext(env, `bench-${mode.key}`, mode.env);
      results[mode.key] = await runMode(env, ctx, mode, mode.burst ? burst : 0, bRuns).catch((e: Error) => {
        throw new Error(`mode ${mode.label}: ${e.message}`, { cause: e });
      });
    }
    const idle = results.idle!;
    const s = (ms: number) => round(ms / 1000, 3);
    const metrics: Metric[] = [];
    for (const mode of MODES.filter((m) => m.burst)) {
      const r = results[mode.key]!;
      const ratio = round(r.end.p99 / idle.end.p99, 2);
      const vsIdle = `${s(r.end.p99)} s vs ${s(idle.end.p99)} s`;
      const first = `B create -> first step p99, ${mode.label}`;
      const end = `B create -> end p99 / idle, ${mode.label}`;
      // Targets are for flow control as shipped (on, FLOW_STEP_PRIORITY on); the first-come-first-served line is shown.
      if (!('FLOW_CONTROL' in mode.env) && !('FLOW_STEP_PRIORITY' in mode.env))
        metrics.push(
          atMost(`${mode.key}_first_p99_s`, first, s(r.first.p99), 's', 0.5),
          atMost(`${mode.key}_end_p99_vs_idle`, end, ratio, 'x', 3, vsIdle),
        );
      // Flow control off is the figure before admission existed: shown, no target.
      else
        metrics.push(
          { key: `${mode.key}_first_p99_s`, label: first, value: s(r.first.p99), unit: 's' },
          { key: `${mode.key}_end_p99_vs_idle`, label: end, value: ratio, unit: 'x', note: vsIdle },
        );
    }
    const row = (label: string, r: ModeResult) => [
      label,
      s(r.first.p50),
      s(r.first.p99),
      s(r.end.p50),
      s(r.end.p99),
      r.burstCreateMs === undefined ? '' : s(r.burstCreateMs),
      r.burstDrainMs === undefined ? '' : s(r.burstDrainMs),
    ];
    return {
      name: 'neighbour',
      title: this.title,
      metrics,
      tables: [
        {
          title: `tenant B (${bRuns} runs, one every ${B_EVERY_MS} ms, ${STEPS} steps), seconds`,
          header: ['fleet', 'first p50', 'first p99', 'end p50', 'end p99', 'A created in', 'A drained in'],
          rows: MODES.map((m) => row(m.burst ? `A burst ${burst}, ${m.label}` : m.label, results[m.key]!)),
        },
      ],
      details: { burst, bRuns, steps: STEPS, workers: WORKERS, results },
    };
  },
};

async function runMode(
  env: BenchEnv,
  ctx: EngineContext,
  mode: Mode,
  burst: number,
  bRuns: number,
): Promise<ModeResult> {
  await env.reset();
  const fleet = await startFleet(env, ctx, WORKERS, mode.env);
  try {
    const tag = `${mode.key}${Date.now().toString(36)}`;
    const t0 = Date.now();
    const aRuns = await createMany(
      ctx,
      'tenant-a',
      Array.from({ length: burst }, (_, i) => `A-${tag}-${i}`),
      { steps: STEPS },
    );
    const burstCreateMs = Date.now() - t0;
    const bStart = Date.now();
    const bCreated: { runId: string; createdAt: number }[] = [];
    for (let i = 0; i < bRuns; i++) {
      await sleep(Math.max(0, bStart + i * B_EVERY_MS - Date.now()));
      bCreated.push(await createFlowRun(ctx, 'tenant-b', `B-${tag}-${i}`, { steps: STEPS }));
    }
    const timeoutMs = 120_000 + burst * 100;
    await waitAllEnded(
      ctx,
      bCreated.map((r) => r.runId),
      timeoutMs,
    );
    await waitAllEnded(
      ctx,
      aRuns.map((r) => r.runId),
      timeoutMs,
    );
    const burstDrainMs = Date.now() - t0;
    const first: number[] = [];
    const end: number[] = [];
    for (const r of bCreated) {
      const t = await runTimeline(ctx, r.runId);
      if (t.status !== 'completed') throw new Error(`tenant B's run ${r.runId} ended ${t.status}`);
      first.push(t.firstStepAt - r.createdAt);
      end.push(t.endedAt - r.createdAt);
    }
    return {
      first: dist(first),
      end: dist(end),
      ...(burst > 0 ? { burstCreateMs, burstDrainMs } : {}),
    };
  } finally {
    await stopFleet(fleet);
  }
}
