/**
 * Section "flowcost": what flow control costs a run that no limit holds back, per step, against flow control off.
 * Two worker pools of one process each (the same bench worker, `FLOW_CONTROL=false` and `true` with the default
 * limits), used in turn on the same Redis, in paired rounds whose order alternates:
 *   - loaded: 40 runs of 40 read steps at once, concurrency 20 (under the default tenant limit of 50: every run is
 *     admitted at its creation, nothing waits in line): worker CPU per step (process.cpuUsage of the worker, from go
 *     to its last completion: the step, the release and admission at each run's end, the bookkeeping sweep), Redis
 *     CPU per step, steps per second;
 *   - unloaded: one run alone: step latency (BullMQ 'active' -> 'completed' in the worker).
 * Under flow control runs are created through the producer's intake (their tenant's line, admitted at once); off,
 * through the same intake without admission. Creation is not measured (the workers start after it).
 */
import { startRun } from '../../src/producer/intake.js';
import type { Script } from '../../src/models/scriptedTurns.js';
import type { EngineContext } from '../../src/runs/engineContext.js';
import { dist, median, round } from '../lib/stats.js';
import {
  atMost,
  type BenchEnv,
  type BenchOptions,
  type Metric,
  type Section,
  type SectionResult,
} from '../lib/types.js';
import { runRound, ticket, type RoundResult, type RoundSpec } from '../lib/workload.js';
import { flowContext } from '../lib/flowFleet.js';
import type { WorkerPool } from '../lib/pool.js';

/** The bound: a run that is not limited costs at most 5 % more per step. */
const TARGET = 1.05;
const MODES = ['off', 'on'] as const;
type Mode = (typeof MODES)[number];
const ENV: Record<Mode, Record<string, string>> = { off: { FLOW_CONTROL: 'false' }, on: { FLOW_CONTROL: 'true' } };

interface Samples {
  cpu: number[];
  redisCpu: number[];
  rate: number[];
  latency: number[];
}

export const flowCost: Section = {
  name: 'flowcost',
  title: 'Flow control on with no limit hit against off: cost per step (paired alternating rounds, 1 worker process)',
  async run(env: BenchEnv, opts: BenchOptions): Promise<SectionResult> {
    const loaded = opts.quick ? { chains: 20, steps: 20 } : { chains: 40, steps: 40 };
    const serialSteps = opts.quick ? 60 : 200;
    const rounds = Math.max(opts.quick ? 2 : 6, opts.rounds);
    const warmUp = opts.quick ? 1 : 3;
    const ctxs: Record<Mode, EngineContext> = {
      off: await flowContext(env, 'bench-flowcost-off', ENV.off),
      on: await flowContext(env, 'bench-flowcost-on', ENV.on),
    };
    const create = (mode: Mode) => async (id: string, script: Script, maxSteps: number) => {
      const r = await startRun(
        ctxs[mode],
        { tenant: 'bench', ticket: ticket(id), budget: { maxSteps }, agent: { model: 'scripted', script } },
        `k-${id}`,
      );
      return r.runId;
    };
    const pools: Record<Mode, WorkerPool> = {
      off: await env.spawnPool(1, ENV.off),
      on: await env.spawnPool(1, ENV.on),
    };
    const seen: Record<Mode, Samples> = {
      off: { cpu: [], redisCpu: [], rate: [], latency: [] },
      on: { cpu: [], redisCpu: [], rate: [], latency: [] },
    };
    const round1 = (mode: Mode, spec: Omit<RoundSpec, 'kind' | 'create'>): Promise<RoundResult> =>
      runRound(env, pools[mode], { kind: 'engine', create: create(mode), ...spec });
    try {
      for (let r = 0; r < warmUp + rounds; r++) {
        const order: Mode[] = r % 2 === 0 ? ['off', 'on'] : ['on', 'off'];
        for (const mode of order) {
          const l = await round1(mode, { ...loaded, tag: `fc${mode}${r}` });
          const u = await round1(mode, { chains: 1, steps: serialSteps, tag: `fu${mode}${r}`, recordLatency: true });
          if (r < warmUp) continue;
          seen[mode].cpu.push(l.nodeCpuUsPerStep);
          seen[mode].redisCpu.push(l.redisCpuUsPerStep);
          seen[mode].rate.push(l.stepsPerSec);
          seen[mode].latency.push(median(u.latencies));
        }
      }
    } finally {
      await Promise.all(MODES.map((m) => pools[m].kill()));
    }
    // Ratios per pair (the two rounds of one cycle ran next to each other), then their median.
    const paired = (f: (s: Samples) => number[]) => round(median(f(seen.on).map((v, i) => v / f(seen.off)[i]!)), 3);
    const cpuRatio = paired((s) => s.cpu);
    const latencyRatio = paired((s) => s.latency);
    const redisRatio = paired((s) => s.redisCpu);
    const rateRatio = paired((s) => s.rate);
    const m = (xs: number[], d = 1) => round(median(xs), d);
    const metrics: Metric[] = [
      atMost(
        'worker_cpu_ratio',
        `worker CPU per step, on / off (median of ${rounds} paired rounds)`,
        cpuRatio,
        'x',
        TARGET,
        `${m(seen.on.cpu)} vs ${m(seen.off.cpu)} µs`,
      ),
      atMost(
        'latency_ratio',
        `step latency of a run alone, on / off (median of ${rounds} paired rounds)`,
        latencyRatio,
        'x',
        TARGET,
        `${m(seen.on.latency, 3)} vs ${m(seen.off.latency, 3)} ms`,
      ),
      {
        key: 'redis_cpu_ratio',
        label: 'Redis CPU per step, on / off',
        value: redisRatio,
        unit: 'x',
        note: `${m(seen.on.redisCpu)} vs ${m(seen.off.redisCpu)} µs`,
      },
      {
        key: 'steps_per_s_ratio',
        label: 'steps per second, on / off',
        value: rateRatio,
        unit: 'x',
        note: `${m(seen.on.rate, 0)} vs ${m(seen.off.rate, 0)}`,
      },
    ];
    const row = (label: string, f: (s: Samples) => number[], d: number, ratio: number) => [
      label,
      m(f(seen.off), d),
      m(f(seen.on), d),
      `${ratio}x`,
    ];
    return {
      name: this.name,
      title: this.title,
      metrics,
      tables: [
        {
          title: `per step, medians of ${rounds} paired rounds (after ${warmUp} warm-up cycles); ratio = median of the pairs' on / off`,
          header: ['per step', 'flow off', 'flow on (no limit hit)', 'on / off'],
          rows: [
            row(`worker CPU, µs (${loaded.chains} runs x ${loaded.steps} steps)`, (s) => s.cpu, 1, cpuRatio),
            row('Redis CPU, µs (same rounds)', (s) => s.redisCpu, 1, redisRatio),
            row('steps per second (same rounds)', (s) => s.rate, 0, rateRatio),
            row(`latency of a run alone, ms (${serialSteps} steps, p50)`, (s) => s.latency, 3, latencyRatio),
          ],
        },
      ],
      details: {
        loaded,
        serialSteps,
        rounds,
        warmUp,
        samples: seen,
        latencyDist: { off: dist(seen.off.latency), on: dist(seen.on.latency) },
      },
    };
  },
};
