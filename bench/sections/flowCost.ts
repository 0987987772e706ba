/**
 * Section "flowcost": what flow control costs a run that no limit holds back, per step, against flow control off.
 * Three worker pools of one process each (the same bench worker: `FLOW_CONTROL=false`; no flow setting, flow
 * control on by default with the default limits; FLOW_STEP_PRIORITY=false, which tells the step priorities' part of
 * the cost from admission's),
 * used in turn on the same Redis, in rounds whose order rotates, each compared with the flow-off round of its cycle:
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
const MODES = ['off', 'on', 'onfifo'] as const;
type Mode = (typeof MODES)[number];
/** Only what a pool changes: flow control on is the default. */
const ENV: Record<Mode, Record<string, string>> = {
  off: { FLOW_CONTROL: 'false' },
  on: {},
  onfifo: { FLOW_STEP_PRIORITY: 'false' },
};

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
    const rounds = Math.max(opts.quick ? 2 : 12, opts.rounds);
    const warmUp = opts.quick ? 1 : 3;
    const ctxs = {} as Record<Mode, EngineContext>;
    const pools = {} as Record<Mode, WorkerPool>;
    const seen = {} as Record<Mode, Samples>;
    for (const mode of MODES) {
      ctxs[mode] = await flowContext(env, `bench-flowcost-${mode}`, ENV[mode]);
      pools[mode] = await env.spawnPool(1, ENV[mode]);
      seen[mode] = { cpu: [], redisCpu: [], rate: [], latency: [] };
    }
    const create = (mode: Mode) => async (id: string, script: Script, maxSteps: number) => {
      const r = await startRun(
        ctxs[mode],
        { tenant: 'bench', ticket: ticket(id), budget: { maxSteps }, agent: { model: 'scripted', script } },
        `k-${id}`,
      );
      return r.runId;
    };
    const round1 = (mode: Mode, spec: Omit<RoundSpec, 'kind' | 'create'>): Promise<RoundResult> =>
      runRound(env, pools[mode], { kind: 'engine', create: create(mode), ...spec });
    try {
      for (let r = 0; r < warmUp + rounds; r++) {
        const order: Mode[] = MODES.map((_, i) => MODES[(i + r) % MODES.length]!);
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
    // Ratios per cycle (its rounds ran next to each other), then their median.
    const paired = (f: (s: Samples) => number[], mode: Mode = 'on') =>
      round(median(f(seen[mode]).map((v, i) => v / f(seen.off)[i]!)), 3);
    const cpuRatio = paired((s) => s.cpu);
    const latencyRatio = paired((s) => s.latency);
    const redisRatio = paired((s) => s.redisCpu);
    const rateRatio = paired((s) => s.rate);
    const fifo = {
      cpu: paired((s) => s.cpu, 'onfifo'),
      redisCpu: paired((s) => s.redisCpu, 'onfifo'),
      rate: paired((s) => s.rate, 'onfifo'),
      latency: paired((s) => s.latency, 'onfifo'),
    };
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
      {
        key: 'fifo_worker_cpu_ratio',
        label: 'worker CPU per step, on with FLOW_STEP_PRIORITY=false / off',
        value: fifo.cpu,
        unit: 'x',
        note: `${m(seen.onfifo.cpu)} vs ${m(seen.off.cpu)} µs`,
      },
    ];
    const row = (label: string, f: (s: Samples) => number[], d: number, ratio: number, fifoRatio: number) => [
      label,
      m(f(seen.off), d),
      m(f(seen.on), d),
      `${ratio}x`,
      m(f(seen.onfifo), d),
      `${fifoRatio}x`,
    ];
    return {
      name: this.name,
      title: this.title,
      metrics,
      tables: [
        {
          title: `per step, medians of ${rounds} paired rounds (after ${warmUp} warm-up cycles); ratio = median of the pairs' on / off`,
          header: ['per step', 'flow off', 'flow on (no limit hit)', 'on / off', 'on, steps FIFO', 'FIFO / off'],
          rows: [
            row(`worker CPU, µs (${loaded.chains} runs x ${loaded.steps} steps)`, (s) => s.cpu, 1, cpuRatio, fifo.cpu),
            row('Redis CPU, µs (same rounds)', (s) => s.redisCpu, 1, redisRatio, fifo.redisCpu),
            row('steps per second (same rounds)', (s) => s.rate, 0, rateRatio, fifo.rate),
            row(
              `latency of a run alone, ms (${serialSteps} steps, p50)`,
              (s) => s.latency,
              3,
              latencyRatio,
              fifo.latency,
            ),
          ],
        },
      ],
      details: {
        loaded,
        serialSteps,
        rounds,
        warmUp,
        samples: seen,
        latencyDist: Object.fromEntries(MODES.map((mode) => [mode, dist(seen[mode].latency)])),
      },
    };
  },
};
