/**
 * Section "stepcost": per-step Redis cost at step 1, 100 and 1,000 of one long
 * run whose observations are 20 KB each (read_ticket of a 20 KB ticket at
 * every step; --quick: steps 1, 100, 300). Invariant 3 says a step's cost must
 * not grow with the transcript (at step 1,000 the journal holds ~20 MB).
 *
 * Cost, per step, without MONITOR: the engine's StepProcessor is driven one
 * job at a time (BullMQ getNextJob -> FleetWorker's processor -> BullMQ
 * moveToCompleted, what the Worker does) with INFO snapshots between steps:
 * commands executed by Redis (commandstats, Lua-internal included), requests
 * sent by the client, network bytes in + out, Redis CPU. Latency: the same
 * driven step, and (separately) a second identical run on a started
 * FleetWorker ('active' -> 'completed' per step). The long run is repeated and
 * each step's figures are the median over the repeats; windows of 10 steps
 * (1-10, 91-100, 991-1000) are then averaged (counts, bytes) or their median
 * taken (times).
 */
import { readJournal } from '../../src/store/runJournal.js';
import { randomUUID } from 'node:crypto';
import { Worker, type Job } from 'bullmq';
import { createEffectRunner } from '../../src/ledger/runner.js';
import { FleetWorker } from '../../src/worker/fleetWorker.js';
import { clientCounts, diffCounts, sumCounts } from '../lib/clientCounter.js';
import { calibrate, delta, snapshot } from '../lib/redisInfo.js';
import { mean, median, round } from '../lib/stats.js';
import {
  atMost,
  type BenchEnv,
  type BenchOptions,
  type Metric,
  type Section,
  type SectionResult,
} from '../lib/types.js';
import { createRun, readOnlyScript } from '../lib/workload.js';

export const GROWTH_TARGET = 1.2;
const OBSERVATION_BYTES = 20 * 1024;
/** 20 KB observations are ~5,100 context tokens each: 1,000 steps need ~5.2 M of budget. */
const MAX_TOKENS = 40_000_000;

/** The measured steps; each is the last of a 10-step window (step 1: steps 1-10). */
const pointsFor = (quick: boolean) => (quick ? [1, 100, 300] : [1, 100, 1000]);
const windowOf = (p: number): [number, number] => (p <= 10 ? [1, 10] : [p - 9, p]);
const windowLabel = (p: number) => windowOf(p).join('-');

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
  const words =
    'the parcel arrived with a cracked lid and the customer would like a replacement or a refund please advise'.split(
      ' ',
    );
  let s = '';
  for (let i = 0; s.length < bytes; i++) s += `${words[i % words.length]!} `;
  return s.slice(0, bytes);
}

async function driveRun(env: BenchEnv, runId: string, record: boolean, maxSteps: number): Promise<StepCost[]> {
  const { ctx, admin } = env;
  const fleet = new FleetWorker(ctx, { effects: createEffectRunner(ctx) }); // its workers never run: we drive its processor
  const queueName = ctx.keys.queueName(ctx.keys.shardOf(runId));
  const manual = new Worker(queueName, null, {
    connection: ctx.redis,
    prefix: ctx.keys.bullPrefix,
    lockDuration: 60_000,
  });
  const signal = new AbortController().signal;
  const costs: StepCost[] = [];
  try {
    await manual.waitUntilReady();
    const calib = record ? await calibrate(admin) : { netIn: 0, netOut: 0, cpuUs: 0 };
    for (let i = 0; i < maxSteps + 5; i++) {
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
          step,
          redisCmds: d.calls,
          clientCmds: sumCounts(diffCounts(c1, c0)),
          bytesIn: d.netIn,
          bytesOut: d.netOut,
          redisCpuUs: d.cpuUs,
          scriptUsec: d.scriptUsec,
          aofBytes: d.aofBytes,
          latencyMs: t1 - t0,
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
    w.on('failed', (job: Job | undefined, err: Error) =>
      console.error(`[bench] stepcost: job ${job?.id} failed: ${err.message}`),
    );
  }
  await fleet.start();
  try {
    const timeout = new Promise<never>((_, rej) =>
      setTimeout(() => rej(new Error(`fleet run ${runId} did not finish`)), 300_000).unref(),
    );
    await Promise.race([done, timeout]);
  } finally {
    await fleet.stop(true);
  }
  return byStep;
}

export const stepCost: Section = {
  name: 'stepcost',
  title: `Per-step Redis cost at step 1, 100 and 1,000 of one run with ${OBSERVATION_BYTES / 1024} KB observations`,
  async run(env: BenchEnv, opts: BenchOptions): Promise<SectionResult> {
    const body = ticketBody(OBSERVATION_BYTES);
    const points = pointsFor(opts.quick);
    const last = points[points.length - 1]!;
    // Steps 1..last all read_ticket (a script holds at most 1,000 turns, so no final answer): the
    // budget (maxSteps = last) stops the run after step last.
    const maxSteps = last;
    const steps = last; // jobs to wait for on the FleetWorker (the stop may or may not be a job of its own)
    const script = readOnlyScript(last + 1).slice(0, last);
    const repeats = opts.quick ? 2 : 5;
    await env.reset();
    // Warm-up (JIT, script cache): a shorter run of the same shape, not recorded.
    await driveRun(
      env,
      await createRun(env.ctx, 'stepcost-warmup', readOnlyScript(60), { maxSteps, body, maxTokens: MAX_TOKENS }),
      false,
      maxSteps,
    );
    const runs: StepCost[][] = [];
    const fleetRuns: Map<number, number>[] = [];
    let status: string | null = null;
    let journalLen = 0;
    let journalBytes = 0;
    for (let r = 0; r < repeats; r++) {
      await env.reset();
      const runId = await createRun(env.ctx, `stepcost-long-${r}`, script, { maxSteps, body, maxTokens: MAX_TOKENS });
      const c = await driveRun(env, runId, true, maxSteps);
      status = await env.ctx.redis.hget(env.ctx.keys.run(runId).run, 'status');
      // An ended run's journal is packed (src/runs/compact.ts): read and sized in whichever form it is.
      const k = env.ctx.keys.run(runId);
      journalLen = (await readJournal(env.ctx.redis, k)).length;
      journalBytes = 0;
      for (const key of [k.journal, k.journalPacked])
        journalBytes += Number(await env.admin.call('MEMORY', 'USAGE', key, 'SAMPLES', '0'));
      if (c.length < last) throw new Error(`the long run stopped after ${c.length} steps (status ${status})`);
      runs.push(c);
      await env.reset();
      const runId2 = await createRun(env.ctx, `stepcost-fleet-${r}`, script, { maxSteps, body, maxTokens: MAX_TOKENS });
      fleetRuns.push(await fleetLatencies(env, runId2, steps));
    }
    // Per step, the median over the repeats (each figure separately).
    const costs: StepCost[] = runs[0]!.map((first, i) => {
      const at = runs.map((r) => r[i]).filter((c): c is StepCost => c !== undefined);
      const m = (f: (c: StepCost) => number) => median(at.map(f));
      return {
        step: first.step,
        redisCmds: m((c) => c.redisCmds),
        clientCmds: m((c) => c.clientCmds),
        bytesIn: m((c) => c.bytesIn),
        bytesOut: m((c) => c.bytesOut),
        redisCpuUs: m((c) => c.redisCpuUs),
        scriptUsec: m((c) => c.scriptUsec),
        aofBytes: m((c) => c.aofBytes),
        latencyMs: m((c) => c.latencyMs),
      };
    });
    const fleetLat = new Map<number, number>();
    for (const step of fleetRuns[0]!.keys())
      fleetLat.set(step, median(fleetRuns.map((f) => f.get(step) ?? NaN).filter(Number.isFinite)));

    const window = (p: number) => {
      const [from, to] = windowOf(p);
      return costs.filter((c) => c.step >= from && c.step <= to);
    };
    // Counts and bytes are deterministic: means. Times are noisy (GC, AOF fsync, cron): medians.
    const series: {
      key: string;
      label: string;
      unit: string;
      f: (c: StepCost) => number;
      agg: 'avg' | 'median';
      target: boolean;
    }[] = [
      {
        key: 'redis_cmds',
        label: 'Redis commands executed (incl. in Lua)',
        unit: 'cmds',
        f: (c) => c.redisCmds,
        agg: 'avg',
        target: true,
      },
      {
        key: 'client_cmds',
        label: 'requests sent to Redis',
        unit: 'cmds',
        f: (c) => c.clientCmds,
        agg: 'avg',
        target: true,
      },
      {
        key: 'net_bytes',
        label: 'network bytes in + out',
        unit: 'B',
        f: (c) => c.bytesIn + c.bytesOut,
        agg: 'avg',
        target: true,
      },
      {
        key: 'net_in_bytes',
        label: 'network bytes in (to Redis)',
        unit: 'B',
        f: (c) => c.bytesIn,
        agg: 'avg',
        target: false,
      },
      { key: 'aof_bytes', label: 'AOF bytes appended', unit: 'B', f: (c) => c.aofBytes, agg: 'avg', target: false },
      // Redis CPU and script time are reported without a target: on this 2-core machine they move by +-20 %
      // between identical runs (no trend over the run's length; see details.perStep).
      { key: 'redis_cpu_us', label: 'Redis CPU', unit: 'µs', f: (c) => c.redisCpuUs, agg: 'median', target: false },
      {
        key: 'script_usec',
        label: 'Redis time in scripts (commandstats)',
        unit: 'µs',
        f: (c) => c.scriptUsec,
        agg: 'median',
        target: false,
      },
      {
        key: 'latency_ms',
        label: 'step latency, driven',
        unit: 'ms',
        f: (c) => c.latencyMs,
        agg: 'median',
        target: true,
      },
      {
        key: 'latency_avg_ms',
        label: 'step latency, driven',
        unit: 'ms',
        f: (c) => c.latencyMs,
        agg: 'avg',
        target: false,
      },
    ];
    const metrics: Metric[] = [];
    const rows: (string | number)[][] = [];
    const at = (step: number) => costs.find((c) => c.step === step);
    const mid = points[1]!;
    const cell = (v: number | undefined, d = 1) => (v === undefined ? '' : round(v, d));
    for (const s of series) {
      const agg = s.agg === 'avg' ? mean : median;
      const w = points.map((p) => agg(window(p).map(s.f)));
      const first = w[0]!;
      const ratios = w.slice(1).map((x) => x / first);
      rows.push([
        `${s.label} (${s.unit})`,
        s.agg,
        ...points.map((p) => cell(at(p) && s.f(at(p)!))),
        ...w.map((x) => round(x, 1)),
        ...ratios.map((x) => `${round(x, 3)}x`),
      ]);
      const note = `${w.map((x) => round(x, 1)).join(' -> ')} ${s.unit}`;
      const label = `${s.label}: steps ${windowLabel(last)} / ${windowLabel(1)} (${s.agg})`;
      const r = round(ratios[ratios.length - 1]!, 3);
      metrics.push(
        s.target
          ? atMost(`${s.key}_ratio`, label, r, 'x', GROWTH_TARGET, note)
          : { key: `${s.key}_ratio`, label, value: r, unit: 'x', note },
      );
      metrics.push({
        key: `${s.key}_ratio_${mid}`,
        label: `${s.label}: steps ${windowLabel(mid)} / ${windowLabel(1)} (${s.agg})`,
        value: round(ratios[0]!, 3),
        unit: 'x',
      });
    }
    const fwin = (p: number) => {
      const [from, to] = windowOf(p);
      return [...fleetLat].filter(([st]) => st >= from && st <= to).map(([, v]) => v);
    };
    const fw = points.map((p) => median(fwin(p)));
    const fr = fw.slice(1).map((x) => x / fw[0]!);
    rows.push([
      'step latency, FleetWorker (ms)',
      'median',
      ...points.map((p) => cell(fleetLat.get(p), 3)),
      ...fw.map((x) => round(x, 3)),
      ...fr.map((x) => `${round(x, 3)}x`),
    ]);
    metrics.push(
      atMost(
        'fleet_latency_ratio',
        `step latency, FleetWorker: steps ${windowLabel(last)} / ${windowLabel(1)} (median)`,
        round(fr[fr.length - 1]!, 3),
        'x',
        GROWTH_TARGET,
        `${fw.map((x) => round(x, 2)).join(' -> ')} ms`,
      ),
    );
    metrics.push({
      key: `fleet_latency_ratio_${mid}`,
      label: `step latency, FleetWorker: steps ${windowLabel(mid)} / ${windowLabel(1)} (median)`,
      value: round(fr[0]!, 3),
      unit: 'x',
    });
    return {
      name: this.name,
      title: this.title,
      metrics,
      tables: [
        {
          title:
            `Per step: steps ${points.join(', ')} and the 10-step windows ending there (ratio = window / steps 1-10); ${repeats} repeats, per-step medians; the journal held ${journalLen} entries (${round(journalBytes / 1e6, 1)} MB) at the end. ` +
            'Driven = getNextJob + processor + moveToCompleted: 3 requests (a running Worker fetches the next job inside the completion: 2). Step 1 also reads the run spec (bytes out).',
          header: [
            'per step',
            'agg',
            ...points.map((p) => `step ${p}`),
            ...points.map((p) => `steps ${windowLabel(p)}`),
            ...points.slice(1).map((p) => `${p} / 1`),
          ],
          rows,
        },
      ],
      details: {
        observationBytes: OBSERVATION_BYTES,
        points,
        steps: costs.length,
        repeats,
        note: 'per step: median over the repeats',
        finalStatus: status,
        journalLength: journalLen,
        journalBytes,
        atPoints: Object.fromEntries(points.map((p) => [p, at(p)])),
        // The windows and every 50th step (the whole series of 1,000 steps would make the JSON line ~150 KB).
        perStep: costs
          .filter((c) => c.step % 50 === 0 || points.some((p) => c.step >= windowOf(p)[0] && c.step <= windowOf(p)[1]))
          .map((c) => ({ ...c, latencyMs: round(c.latencyMs, 3), redisCpuUs: round(c.redisCpuUs, 0) })),
      },
    };
  },
};
