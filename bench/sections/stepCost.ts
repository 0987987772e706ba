/**
 * Section "stepcost": per-step Redis cost at step 1 vs step 200 of one long
 * run whose observations are 20 KB each (read_ticket of a 20 KB ticket at
 * every step). Invariant 3 says a step's cost must not grow with the transcript.
 *
 * Cost, per step, without MONITOR: the engine's StepProcessor is driven one
 * job at a time (BullMQ getNextJob -> FleetWorker's processor -> BullMQ
 * moveToCompleted, what the Worker does) with INFO snapshots between steps:
 * commands executed by Redis (commandstats, Lua-internal included), requests
 * sent by the client, network bytes in + out, Redis CPU. Latency: the same
 * driven step, and (separately) a second identical run on a started
 * FleetWorker ('active' -> 'completed' per step). The long run is repeated and
 * each step's figures are the median over the repeats; windows of 10 steps
 * are then averaged (counts, bytes) or their median taken (times).
 */
import { randomUUID } from 'node:crypto';
import { Worker, type Job } from 'bullmq';
import { createEffectRunner } from '../../src/ledger/runner.js';
import { FleetWorker } from '../../src/worker/fleetWorker.js';
import { clientCounts, diffCounts, sumCounts } from '../lib/clientCounter.js';
import { calibrate, delta, snapshot } from '../lib/redisInfo.js';
import { mean, median, round } from '../lib/stats.js';
import { atMost, type BenchEnv, type BenchOptions, type Metric, type Section, type SectionResult } from '../lib/types.js';
import { createRun, readOnlyScript } from '../lib/workload.js';

export const GROWTH_TARGET = 1.2;
const OBSERVATION_BYTES = 20 * 1024;
const MAX_STEPS = 250;

interface StepCost {
  step: number;
  redisCmds: number;
  clientCmds: number;
  bytesIn: number;
  bytesOut: number;
  redisCpuUs: number;
  scriptUsec: number;
  aofBytes: number;
  latencyMs: number;
}

/** 20 KB of plain text (no JSON escaping), deterministic. */
function ticketBody(bytes: number): string {
  const words = 'the parcel arrived with a cracked lid and the customer would like a replacement or a refund please advise'.split(' ');
  let s = '';
  for (let i = 0; s.length < bytes; i++) s += words[i % words.length] + ' ';
  return s.slice(0, bytes);
}

async function driveRun(env: BenchEnv, runId: string, record: boolean): Promise<StepCost[]> {
  const { ctx, admin } = env;
  const fleet = new FleetWorker(ctx, { effects: createEffectRunner(ctx) }); // its workers never run: we drive its processor
  const queueName = ctx.keys.queueName(ctx.keys.shardOf(runId));
  const manual = new Worker(queueName, null, { connection: ctx.redis as never, prefix: ctx.keys.bullPrefix, lockDuration: 60_000 });
  const signal = new AbortController().signal;
  const costs: StepCost[] = [];
  try {
    await manual.waitUntilReady();
    const calib = record ? await calibrate(admin) : { netIn: 0, netOut: 0, cpuUs: 0 };
    for (let i = 0; i < MAX_STEPS + 5; i++) {
      const token = `${randomUUID()}:${i}`;
      const a = record ? await snapshot(admin) : undefined;
      const c0 = clientCounts();
      const t0 = performance.now();
      const job = (await manual.getNextJob(token, { block: false })) as Job | undefined;
      if (!job) break;
      const step = (job.data as { step: number }).step;
      await fleet.processor.process(job, token, signal);
      await job.moveToCompleted(undefined, token, false);
      const t1 = performance.now();
      const c1 = clientCounts();
      if (a) {
        const d = delta(a, await snapshot(admin), calib);
        costs.push({
          step, redisCmds: d.calls, clientCmds: sumCounts(diffCounts(c1, c0)), bytesIn: d.netIn, bytesOut: d.netOut,
          redisCpuUs: d.cpuUs, scriptUsec: d.scriptUsec, aofBytes: d.aofBytes, latencyMs: t1 - t0,
        });
      }
    }
  } finally {
    await manual.close();
    await fleet.stop(true);
  }
  return costs;
}

/** The same run shape on a started FleetWorker: per-step latency by step number. */
async function fleetLatencies(env: BenchEnv, runId: string, steps: number): Promise<Map<number, number>> {
  const { ctx } = env;
  const fleet = new FleetWorker(ctx, { effects: createEffectRunner(ctx) });
  const started = new Map<string, number>();
  const byStep = new Map<number, number>();
  let resolveDone!: () => void;
  const done = new Promise<void>((r) => (resolveDone = r));
  for (const w of fleet.workers) {
    w.on('active', (job: Job) => started.set(job.id!, performance.now()));
    w.on('completed', (job: Job) => {
      const t0 = started.get(job.id!);
      const step = (job.data as { step: number }).step;
      if (t0 !== undefined) byStep.set(step, performance.now() - t0);
      if (byStep.size >= steps) resolveDone();
    });
    w.on('failed', (job: Job | undefined, err: Error) => console.error(`[bench] stepcost: job ${job?.id} failed: ${err.message}`));
  }
  fleet.start();
  try {
    const timeout = new Promise<never>((_, rej) => setTimeout(() => rej(new Error(`fleet run ${runId} did not finish`)), 120_000).unref());
    await Promise.race([done, timeout]);
  } finally {
    await fleet.stop(true);
  }
  return byStep;
}

export const stepCost: Section = {
  name: 'stepcost',
  title: `Per-step Redis cost, step 1 vs step 200 of one run with ${OBSERVATION_BYTES / 1024} KB observations`,
  async run(env: BenchEnv, opts: BenchOptions): Promise<SectionResult> {
    const body = ticketBody(OBSERVATION_BYTES);
    const steps = 210; // steps 1..209 read_ticket, 210 final answer
    const repeats = opts.quick ? 2 : 5;
    await env.reset();
    // Warm-up (JIT, script cache): a shorter run of the same shape, not recorded.
    await driveRun(env, await createRun(env.ctx, 'stepcost-warmup', readOnlyScript(60), { maxSteps: MAX_STEPS, body }), false);
    const runs: StepCost[][] = [];
    const fleetRuns: Map<number, number>[] = [];
    let status: string | null = null;
    let journalLen = 0;
    for (let r = 0; r < repeats; r++) {
      await env.reset();
      const runId = await createRun(env.ctx, `stepcost-long-${r}`, readOnlyScript(steps), { maxSteps: MAX_STEPS, body });
      const c = await driveRun(env, runId, true);
      status = await env.ctx.redis.hget(env.ctx.keys.run(runId).run, 'status');
      journalLen = await env.ctx.redis.llen(env.ctx.keys.run(runId).journal);
      if (c.length < 200) throw new Error(`the long run stopped after ${c.length} steps (status ${status})`);
      runs.push(c);
      await env.reset();
      const runId2 = await createRun(env.ctx, `stepcost-fleet-${r}`, readOnlyScript(steps), { maxSteps: MAX_STEPS, body });
      fleetRuns.push(await fleetLatencies(env, runId2, steps));
    }
    // Per step, the median over the repeats (each figure separately).
    const costs: StepCost[] = runs[0]!.map((first, i) => {
      const at = runs.map((r) => r[i]).filter((c): c is StepCost => c !== undefined);
      const m = (f: (c: StepCost) => number) => median(at.map(f));
      return {
        step: first.step, redisCmds: m((c) => c.redisCmds), clientCmds: m((c) => c.clientCmds), bytesIn: m((c) => c.bytesIn),
        bytesOut: m((c) => c.bytesOut), redisCpuUs: m((c) => c.redisCpuUs), scriptUsec: m((c) => c.scriptUsec),
        aofBytes: m((c) => c.aofBytes), latencyMs: m((c) => c.latencyMs),
      };
    });
    const fleetLat = new Map<number, number>();
    for (const step of fleetRuns[0]!.keys()) fleetLat.set(step, median(fleetRuns.map((f) => f.get(step) ?? NaN).filter(Number.isFinite)));

    const window = (from: number, to: number) => costs.filter((c) => c.step >= from && c.step <= to);
    const early = window(1, 10);
    const late = window(191, 200);
    // Counts and bytes are deterministic: means. Times are noisy (GC, AOF fsync, cron): medians.
    const series: { key: string; label: string; unit: string; f: (c: StepCost) => number; agg: 'avg' | 'median'; target: boolean }[] = [
      { key: 'redis_cmds', label: 'Redis commands executed (incl. in Lua)', unit: 'cmds', f: (c) => c.redisCmds, agg: 'avg', target: true },
      { key: 'client_cmds', label: 'requests sent to Redis', unit: 'cmds', f: (c) => c.clientCmds, agg: 'avg', target: true },
      { key: 'net_bytes', label: 'network bytes in + out', unit: 'B', f: (c) => c.bytesIn + c.bytesOut, agg: 'avg', target: true },
      { key: 'net_in_bytes', label: 'network bytes in (to Redis)', unit: 'B', f: (c) => c.bytesIn, agg: 'avg', target: false },
      { key: 'aof_bytes', label: 'AOF bytes appended', unit: 'B', f: (c) => c.aofBytes, agg: 'avg', target: false },
      // Redis CPU and script time are reported without a target: on this 2-core machine they move by +-20 %
      // between identical runs (no trend over the run's length; see details.perStep).
      { key: 'redis_cpu_us', label: 'Redis CPU', unit: 'µs', f: (c) => c.redisCpuUs, agg: 'median', target: false },
      { key: 'script_usec', label: 'Redis time in scripts (commandstats)', unit: 'µs', f: (c) => c.scriptUsec, agg: 'median', target: false },
      { key: 'latency_ms', label: 'step latency, driven', unit: 'ms', f: (c) => c.latencyMs, agg: 'median', target: true },
      { key: 'latency_avg_ms', label: 'step latency, driven', unit: 'ms', f: (c) => c.latencyMs, agg: 'avg', target: false },
    ];
    const metrics: Metric[] = [];
    const rows: (string | number)[][] = [];
    const at = (step: number) => costs.find((c) => c.step === step);
    for (const s of series) {
      const agg = s.agg === 'avg' ? mean : median;
      const a = agg(early.map(s.f));
      const b = agg(late.map(s.f));
      const s1 = at(1);
      const s200 = at(200);
      rows.push([`${s.label} (${s.unit})`, s.agg, s1 ? round(s.f(s1), 1) : '', s200 ? round(s.f(s200), 1) : '', round(a, 1), round(b, 1), `${round(b / a, 3)}x`]);
      const label = `${s.label}: steps 191-200 / 1-10 (${s.agg})`;
      const note = `${round(a, 1)} -> ${round(b, 1)} ${s.unit}`;
      metrics.push(s.target
        ? atMost(`${s.key}_ratio`, label, round(b / a, 3), 'x', GROWTH_TARGET, note)
        : { key: `${s.key}_ratio`, label, value: round(b / a, 3), unit: 'x', note });
    }
    const fl = (step: number) => fleetLat.get(step);
    const fwin = (from: number, to: number) => [...fleetLat].filter(([s]) => s >= from && s <= to).map(([, v]) => v);
    const fa = median(fwin(1, 10));
    const fb = median(fwin(191, 200));
    rows.push(['step latency, FleetWorker (ms)', 'median', round(fl(1) ?? NaN, 3), round(fl(200) ?? NaN, 3), round(fa, 3), round(fb, 3), `${round(fb / fa, 3)}x`]);
    metrics.push(atMost('fleet_latency_ratio', 'step latency, FleetWorker: steps 191-200 / 1-10 (median)', round(fb / fa, 3), 'x', GROWTH_TARGET, `${round(fa, 2)} -> ${round(fb, 2)} ms`));
    const step200 = costs.find((c) => c.step === 200);
    return {
      name: this.name, title: this.title, metrics,
      tables: [{ title: 'Per step: step 1 and step 200, and the windows 1-10 vs 191-200 (ratio = 191-200 / 1-10). Driven = getNextJob + processor + moveToCompleted: 3 requests (a running Worker fetches the next job inside the completion: 2). Step 1 also reads the run spec (bytes out).', header: ['per step', 'agg', 'step 1', 'step 200', 'steps 1-10', 'steps 191-200', 'ratio'], rows }],
      details: {
        observationBytes: OBSERVATION_BYTES, steps: costs.length, repeats, note: 'per step: median over the repeats', finalStatus: status, journalLength: journalLen,
        step1: costs[0], step200,
        perStep: costs.map((c) => ({ ...c, latencyMs: round(c.latencyMs, 3), redisCpuUs: round(c.redisCpuUs, 0) })),
      },
    };
  },
};
