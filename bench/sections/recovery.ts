/**
 * Section "recovery": how soon a step held by a worker process that gets a
 * signal starts again on ANOTHER worker process, for our engine and for plain
 * BullMQ with its default settings, in the same bench run.
 *
 * Engine (real `npm run worker` processes, src/server/worker.ts), one trial at a
 * time, three settings in turn: the defaults (owner watch every 100 ms and its probe every 20 ms, lock
 * 20 s, stall check 5 s) with SIGTERM and SIGKILL alternating; the previous
 * lock-only setting (lock 1.2 s, stall check 0.6 s, OWNER_WATCH_MS=0) with
 * SIGKILL; and the defaults with SIGSTOP (the frozen victim keeps its
 * connection: lock expiry and the stall check recover it; then SIGCONT, and the
 * run's journal must hold each step once). In each trial two worker processes
 * are live; a support-agent run is created and the one that takes its step 2
 * (search_kb; its lock token names the process) is the victim: the sandbox
 * holds that `kb` read (`slow_commit`, count 1: only this read is slow; the
 * tool's own timeout is 3 s), and 200 ms after the step started the victim gets
 * its signal at T. The figure is the step job's new `processedOn` (set by
 * BullMQ when the other worker moves it to active) minus T. A fresh process
 * replaces the victim for the next trial.
 * Every trial's run must then complete.
 *
 * Plain BullMQ (bench/lib/holdWorker.ts: a Worker with default options whose
 * processor just holds the job): default recovery takes 15-60 s per trial, so
 * the trials run concurrently, one queue (one job) per trial, next to the
 * engine trials: victim Workers take their job at staggered moments over 15 s
 * (lock renewal phases), rescuer Workers start their stall checkers staggered
 * over 30 s (stall-check phases), then every victim process is signalled at the
 * same instant T and each job's new `processedOn` - T is one trial.
 */
import { Queue } from 'bullmq';
import { spawn, type ChildProcess } from 'node:child_process';
import { buildSpec } from '../../src/producer/intake.js';
import { stepJobId } from '../../src/store/keys.js';
import { ownerBaseOfToken } from '../../src/store/bullmqInternals.js';
import { spawnWorker as spawnFleetWorker } from '../../testkit/processes.js';
import { moduleArgs } from '../../testkit/spawnModule.js';
import type { ChaosWorker } from '../../test/e2e/chaos/campaign.js';
import type { HoldMessage, HoldReply } from '../lib/holdWorker.js';
import { dist, round, type Dist } from '../lib/stats.js';
import {
  atMost,
  type BenchEnv,
  type BenchOptions,
  type Metric,
  type Section,
  type SectionResult,
} from '../lib/types.js';
import { TENANT, ticket } from '../lib/workload.js';

export const HANDOFF_P99_TARGET_MS = 100;
export const RECOVERY_P50_TARGET_S = 0.3;
export const RECOVERY_P99_TARGET_S = 0.6;
/** The previous setting: short locks and no owner watch (lock expiry alone), measured beside the new one. */
const LOCK_ONLY: EngineSetting = {
  label: 'lock only (1.2 s / 0.6 s, no owner watch)',
  extra: { LOCK_DURATION_MS: '1200', STALLED_INTERVAL_MS: '600', OWNER_WATCH_MS: '0' },
};
const DEFAULTS: EngineSetting = { label: 'defaults (owner watch)', extra: {} };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const HOLD_PREFIX = 'benchhold';
/** Longest wait for a plain job to restart: lock expiry (15-30 s) + up to two stall intervals (the queue's
 *  `stalled-check` key lets one check run per interval across ALL its workers, the victim's included). */
const PLAIN_WAIT_MS = 100_000;

type Sig = 'SIGTERM' | 'SIGKILL' | 'SIGSTOP';

async function until<T>(
  what: string,
  fn: () => Promise<T | undefined | null | false>,
  timeoutMs: number,
  everyMs = 5,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

// ---------------------------------------------------------------- engine

interface EngineTrial {
  signal: Sig;
  /** signal -> step started on the other worker (processedOn), ms. */
  ms: number;
  /** signal -> victim process exit, ms. */
  exitMs: number;
  exit: string;
  /** The run completed after the handoff. */
  completed: boolean;
  /** SIGSTOP: the run's journal holds each step's decision once after SIGCONT (no double commit). */
  journalOnce?: boolean;
}

/** The engine settings measured: `extra` overrides the defaults of the worker processes. */
interface EngineSetting {
  label: string;
  extra: Record<string, string>;
}

async function engineTrials(
  env: BenchEnv,
  signals: Sig[],
  live: Set<ChaosWorker>,
  setting: EngineSetting,
): Promise<EngineTrial[]> {
  const { ctx } = env;
  const procEnv = { ...env.appEnv, WORKER_METRICS_PORT: '0', ...setting.extra };
  const spawnWorker = async () => {
    const w = await spawnFleetWorker(procEnv, { keep: 'lifecycle', exitBeforeStart: 'return' });
    live.add(w);
    void w.exited.then(() => live.delete(w));
    return w;
  };
  const trials: EngineTrial[] = [];
  // Two live workers; the one that takes step 2 (its lock token names it) is the trial's victim, the other
  // the rescuer, and a fresh process replaces the victim for the next trial. (The kb read is bounded by the
  // tool's 3 s timeout: too short to boot a rescuer once the victim holds the step.)
  let pair: ChaosWorker[] = await Promise.all([spawnWorker(), spawnWorker()]);
  for (let t = 0; t < signals.length; t++) {
    const signal = signals[t]!;
    env.sandbox.setFaults([{ kind: 'slow_commit', resource: 'kb', ms: 30_000, count: 1 }]);
    const spec = buildSpec(ctx, { tenant: TENANT, ticket: ticket(`REC-${Date.now()}-${t}`) }, Date.now());
    if (!(await ctx.store.create(spec, Date.now()))) throw new Error('recovery run already existed');
    const runId = spec.runId;
    const jobKey = ctx.keys.jobHash(ctx.keys.shardOf(runId), stepJobId(runId, 2));
    const p0 = await until('step 2 held', () => ctx.redis.hget(jobKey, 'processedOn'), 30_000);
    const token = await until(
      'step 2 locked',
      () => ctx.redis.get(ctx.keys.jobLock(ctx.keys.shardOf(runId), stepJobId(runId, 2))),
      5_000,
      2,
    );
    const base = ownerBaseOfToken(token);
    const victim = pair.find((w) => w.bullIds.some((id) => id.split('@')[0] === base));
    const rescuer = pair.find((w) => w !== victim);
    if (!victim || !rescuer) throw new Error(`trial ${t}: step 2's lock (${token}) names neither worker`);
    await sleep(200); // the victim is inside the slow kb read
    if ((await ctx.store.readState(runId))?.cursor !== 2)
      throw new Error(`trial ${t}: the victim is not holding step 2`);
    const sentAt = Date.now();
    if (signal !== 'SIGSTOP') victim.sent = signal;
    victim.sentAt = sentAt;
    victim.child.kill(signal);
    const p1 = await until(
      'step 2 started on the rescuer',
      async () => {
        const p = await ctx.redis.hget(jobKey, 'processedOn');
        return p !== null && p !== p0 ? p : undefined;
      },
      signal === 'SIGSTOP' ? 120_000 : 20_000,
      2,
    );
    if (signal === 'SIGSTOP') {
      // Wake the frozen victim: its delivery of step 2 finishes its read and meets the fence; then it stops.
      victim.child.kill('SIGCONT');
      await sleep(3000);
      victim.child.kill('SIGTERM');
    }
    const ex = await victim.exited;
    let completed = false;
    try {
      await until(
        'the run completes',
        async () => (await ctx.redis.hget(ctx.keys.run(runId).run, 'status')) === 'completed',
        20_000,
        20,
      );
      completed = true;
    } catch {
      // reported in the table
    }
    const decided = (await ctx.store.transcript(runId)).filter((e) => e.kind === 'decision').map((e) => e.step);
    const journalOnce = decided.every((s, i) => s === i + 1);
    trials.push({
      signal,
      ms: Number(p1) - sentAt,
      exitMs: ex.at - sentAt,
      exit: ex.signal ?? `code ${ex.code}`,
      completed,
      journalOnce,
    });
    pair = [rescuer, await spawnWorker()];
  }
  env.sandbox.clearFaults();
  for (const w of pair) {
    w.final = true;
    w.child.kill('SIGTERM');
  }
  await Promise.all(pair.map((w) => w.exited));
  return trials;
}

// ---------------------------------------------------------------- plain BullMQ

interface HoldChild {
  proc: ChildProcess;
  exited: Promise<{ at: number; code: number | null; signal: NodeJS.Signals | null }>;
  started: Map<string, () => void>;
  errors: string[];
}

async function spawnHold(env: BenchEnv, onSigterm: 'default' | 'close'): Promise<HoldChild> {
  const proc = spawn(process.execPath, moduleArgs('bench/lib/holdWorker'), {
    env: {
      ...(process.env.PATH ? { PATH: process.env.PATH } : {}),
      ...(process.env.HOME ? { HOME: process.env.HOME } : {}),
      HOLD_REDIS_URL: env.redis.url,
      HOLD_BULL_PREFIX: HOLD_PREFIX,
      HOLD_ON_SIGTERM: onSigterm,
    },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const c: HoldChild = {
    proc,
    started: new Map(),
    errors: [],
    exited: new Promise((resolve) => proc.once('exit', (code, signal) => resolve({ at: Date.now(), code, signal }))),
  };
  const hello = new Promise<void>((resolve, reject) => {
    proc.on('message', (m: HoldReply) => {
      if (m.type === 'hello') resolve();
      else if (m.type === 'started') c.started.get(m.queue)?.();
      else if (c.errors.length < 5) c.errors.push(m.error);
    });
    void c.exited.then((e) => reject(new Error(`hold worker exited before hello (${e.signal ?? e.code})`)));
  });
  await hello;
  return c;
}

function startHold(c: HoldChild, queue: string, holdMs: number): Promise<void> {
  return new Promise<void>((resolve) => {
    c.started.set(queue, resolve);
    c.proc.send({ cmd: 'start', queue, holdMs } satisfies HoldMessage);
  });
}

interface PlainResult {
  kill: number[];
  term: number[];
  /** SIGTERM with a worker.close() handler: per job, signal -> the job finished in place (s). */
  closeFinished: number[];
  closeHandedOver: number;
  closeExitS: number;
  termExit: string;
  killExit: string;
  missing: { kill: number; term: number };
  staggerMs: number;
}

/**
 * The plain baseline: `n` kill trials, `n` SIGTERM trials (no handler: Node's
 * default), `m` SIGTERM trials with a worker.close() handler. Resolves when
 * every stalled job started again (or after PLAIN_WAIT_MS).
 */
async function plainTrials(
  env: BenchEnv,
  n: number,
  m: number,
  children: Set<HoldChild>,
  log: (s: string) => void,
): Promise<PlainResult> {
  const groups = {
    kill: Array.from({ length: n }, (_, i) => `hold-kill-${i}`),
    term: Array.from({ length: n }, (_, i) => `hold-term-${i}`),
    close: Array.from({ length: m }, (_, i) => `hold-close-${i}`),
  };
  const queues = [...groups.kill, ...groups.term, ...groups.close].map(
    (name) => new Queue(name, { connection: env.ctx.redis, prefix: HOLD_PREFIX }),
  );
  try {
    await Promise.all(queues.map((q) => q.add('step', { held: true }, { jobId: 'j1' })));
  } finally {
    await Promise.all(queues.map((q) => q.close()));
  }
  const per = 10;
  const spawnN = async (count: number, mode: 'default' | 'close') => {
    const cs = await Promise.all(Array.from({ length: count }, () => spawnHold(env, mode)));
    for (const c of cs) children.add(c);
    return cs;
  };
  const [killVictims, termVictims, closeVictims, rescuers] = await Promise.all([
    spawnN(Math.ceil(n / per), 'default'),
    spawnN(Math.ceil(n / per), 'default'),
    spawnN(1, 'close'),
    spawnN(2, 'default'),
  ]);
  const jobKey = (q: string) => `${HOLD_PREFIX}:${q}:j1`;
  const processedOn = async (q: string) => Number((await env.admin.hget(jobKey(q), 'processedOn')) ?? 0);

  // Victim j takes its job at v_j = j * 15 s / n (lock renewal phases over lockRenewTime);
  // its rescuer starts at v_j + 0.5 s + (j odd ? 15 s : 0) (stall-check phases over ~30 s).
  const staggerMs = 15_000;
  const t0 = Date.now();
  const schedule: Promise<void>[] = [];
  const holdLong = 10 * 60_000;
  let lastRescuerAt = 0;
  for (const [group, victims] of [
    ['kill', killVictims],
    ['term', termVictims],
  ] as const) {
    groups[group].forEach((q, j) => {
      const v = (j * staggerMs) / n;
      const s = v + 500 + (j % 2) * 15_000;
      lastRescuerAt = Math.max(lastRescuerAt, s);
      schedule.push(
        (async () => {
          await sleep(v);
          await startHold(victims[Math.floor(j / per)]!, q, holdLong);
          await until(`${q} taken`, () => processedOn(q), 10_000, 20);
          await sleep(Math.max(0, t0 + s - Date.now()));
          await startHold(rescuers[j % rescuers.length]!, q, holdLong);
        })(),
      );
    });
  }
  const signalAt = t0 + lastRescuerAt + 1500;
  // close(): jobs of 10 s started 4..8 s before the signal; rescuers watch the same queues.
  groups.close.forEach((q, i) => {
    schedule.push(
      (async () => {
        await sleep(Math.max(0, signalAt - 4000 - i * 1000 - Date.now()));
        await startHold(closeVictims[0]!, q, 10_000);
        await until(`${q} taken`, () => processedOn(q), 10_000, 20);
        await startHold(rescuers[i % rescuers.length]!, q, holdLong);
      })(),
    );
  });
  await Promise.all(schedule);
  await sleep(Math.max(0, signalAt - Date.now()));
  const before = new Map<string, number>();
  for (const q of [...groups.kill, ...groups.term, ...groups.close]) before.set(q, await processedOn(q));
  const K = Date.now();
  for (const c of killVictims) c.proc.kill('SIGKILL');
  for (const c of [...termVictims, ...closeVictims]) c.proc.kill('SIGTERM');
  log(`plain BullMQ: ${2 * n + m} victims signalled; waiting for stall recovery (up to ~60 s)`);

  const restarted = new Map<string, number>();
  const closeDone = new Map<string, number>();
  const watch = [...groups.kill, ...groups.term];
  const deadline = K + PLAIN_WAIT_MS;
  while (Date.now() < deadline && (restarted.size < watch.length || closeDone.size < m)) {
    for (const q of watch) {
      if (restarted.has(q)) continue;
      const p = await processedOn(q);
      if (p !== before.get(q)) restarted.set(q, p - K);
    }
    for (const q of groups.close) {
      if (closeDone.has(q)) continue;
      const [fin, p] = await env.admin.hmget(jobKey(q), 'finishedOn', 'processedOn');
      if (fin) closeDone.set(q, Number(fin) - K);
      if (Number(p) !== before.get(q)) closeDone.set(q, Number.NaN); // started elsewhere
    }
    await sleep(100);
  }
  const termExit = await termVictims[0]!.exited;
  const killExit = await killVictims[0]!.exited;
  const closeExit = await closeVictims[0]!.exited;
  const handedOver = [...closeDone.values()].filter((x) => Number.isNaN(x)).length;
  return {
    kill: groups.kill
      .map((q) => restarted.get(q))
      .filter((x): x is number => x !== undefined)
      .map((ms) => ms / 1000),
    term: groups.term
      .map((q) => restarted.get(q))
      .filter((x): x is number => x !== undefined)
      .map((ms) => ms / 1000),
    closeFinished: [...closeDone.values()].filter((x) => !Number.isNaN(x)).map((ms) => ms / 1000),
    closeHandedOver: handedOver,
    closeExitS: (closeExit.at - K) / 1000,
    termExit: termExit.signal ?? `code ${termExit.code}`,
    killExit: killExit.signal ?? `code ${killExit.code}`,
    missing: {
      kill: groups.kill.filter((q) => !restarted.has(q)).length,
      term: groups.term.filter((q) => !restarted.has(q)).length,
    },
    staggerMs,
  };
}

// ---------------------------------------------------------------- section

const fmtDist = (d: Dist, digits: number) => [
  d.n,
  round(d.p50, digits),
  round(d.p90, digits),
  round(d.p99, digits),
  round(d.max, digits),
];

export const recovery: Section = {
  name: 'recovery',
  title: 'Recovery: SIGTERM handoff and SIGKILL recovery of a held step, engine vs plain BullMQ defaults',
  async run(env: BenchEnv, opts: BenchOptions): Promise<SectionResult> {
    const n = opts.quick ? 4 : 20;
    const m = opts.quick ? 2 : 5;
    const log = (s: string) => process.stdout.write(`    ${s}\n`);
    await env.reset();
    const engineProcs = new Set<ChaosWorker>();
    const holdProcs = new Set<HoldChild>();
    env.onCleanup(() => {
      for (const w of engineProcs) if (!w.dead) w.child.kill('SIGKILL');
      for (const c of holdProcs) if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill('SIGKILL');
    });
    let engine: EngineTrial[];
    let lockOnly: EngineTrial[];
    let stopped: EngineTrial[];
    let plain: PlainResult;
    const k = opts.quick ? 1 : 3;
    try {
      const plainP = plainTrials(env, n, m, holdProcs, log);
      plainP.catch(() => undefined);
      // Alternate the signals so both kinds see the same conditions (including the baseline's start-up).
      const signals: Sig[] = Array.from({ length: 2 * n }, (_, i) => (i % 2 === 0 ? 'SIGTERM' : 'SIGKILL'));
      engine = await engineTrials(env, signals, engineProcs, DEFAULTS);
      log(`engine: ${engine.length} trials done (${DEFAULTS.label})`);
      lockOnly = await engineTrials(
        env,
        Array.from({ length: n }, () => 'SIGKILL' as const),
        engineProcs,
        LOCK_ONLY,
      );
      log(`engine: ${lockOnly.length} SIGKILL trials done (${LOCK_ONLY.label})`);
      stopped = await engineTrials(
        env,
        Array.from({ length: k }, () => 'SIGSTOP' as const),
        engineProcs,
        DEFAULTS,
      );
      log(`engine: ${stopped.length} SIGSTOP trials done (${DEFAULTS.label})`);
      plain = await plainP;
    } finally {
      for (const w of engineProcs) if (!w.dead) w.child.kill('SIGKILL');
      for (const c of holdProcs) if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill('SIGKILL');
      env.sandbox.clearFaults();
    }
    const handoff = dist(engine.filter((t) => t.signal === 'SIGTERM').map((t) => t.ms));
    const recov = dist(engine.filter((t) => t.signal === 'SIGKILL').map((t) => t.ms / 1000));
    const termExits = dist(engine.filter((t) => t.signal === 'SIGTERM').map((t) => t.exitMs));
    const lockOnlyRecov = dist(lockOnly.map((t) => t.ms / 1000));
    const stopRecov = dist(stopped.map((t) => t.ms / 1000));
    const notCompleted = [...engine, ...lockOnly, ...stopped].filter((t) => !t.completed).length;
    const doubleCommits = [...engine, ...lockOnly, ...stopped].filter((t) => t.journalOnce === false).length;
    const duplicates = env.sandbox.counts().duplicates;
    const badTermExit = engine.filter((t) => t.signal === 'SIGTERM' && t.exit !== 'code 0').length;
    const pk = dist(plain.kill);
    const pt = dist(plain.term);
    const pc = dist(plain.closeFinished);

    const metrics: Metric[] = [
      { key: 'engine_handoff_p50_ms', label: 'engine SIGTERM handoff p50', value: round(handoff.p50, 1), unit: 'ms' },
      atMost(
        'engine_handoff_p99_ms',
        'engine SIGTERM handoff p99',
        round(handoff.p99, 1),
        'ms',
        HANDOFF_P99_TARGET_MS,
        `${handoff.n} trials, max ${round(handoff.max, 1)} ms`,
      ),
      atMost(
        'engine_recovery_p50_s',
        `engine SIGKILL recovery p50 (owner watch, lock ${env.cfg.LOCK_DURATION_MS / 1000} s)`,
        round(recov.p50, 3),
        's',
        RECOVERY_P50_TARGET_S,
      ),
      atMost(
        'engine_recovery_p99_s',
        `engine SIGKILL recovery p99 (owner watch, lock ${env.cfg.LOCK_DURATION_MS / 1000} s)`,
        round(recov.p99, 3),
        's',
        RECOVERY_P99_TARGET_S,
        `${recov.n} trials, max ${round(recov.max, 3)} s`,
      ),
      {
        key: 'lock_only_recovery_p50_s',
        label: `SIGKILL recovery p50, ${LOCK_ONLY.label}`,
        value: round(lockOnlyRecov.p50, 3),
        unit: 's',
        note: `${lockOnlyRecov.n} trials`,
      },
      {
        key: 'lock_only_recovery_p99_s',
        label: `SIGKILL recovery p99, ${LOCK_ONLY.label}`,
        value: round(lockOnlyRecov.p99, 3),
        unit: 's',
      },
      atMost(
        'engine_sigstop_max_s',
        `SIGSTOP -> step started elsewhere, max (bound: lock + 2 x stall interval)`,
        round(stopRecov.max, 2),
        's',
        (env.cfg.LOCK_DURATION_MS + 2 * env.cfg.STALLED_INTERVAL_MS) / 1000,
        `${stopRecov.n} trials, p50 ${round(stopRecov.p50, 2)} s; lock + 1 interval = ${(env.cfg.LOCK_DURATION_MS + env.cfg.STALLED_INTERVAL_MS) / 1000} s`,
      ),
      atMost(
        'engine_double_commits',
        'runs whose journal holds a step twice (SIGCONT included)',
        doubleCommits,
        'runs',
        0,
      ),
      atMost('engine_duplicate_effects', 'duplicate effects at the sandbox over the section', duplicates, 'effects', 0),
      {
        key: 'plain_sigterm_p50_s',
        label: 'plain BullMQ SIGTERM (default: dies, job stalls) p50',
        value: round(pt.p50, 2),
        unit: 's',
        note: `${pt.n} trials`,
      },
      { key: 'plain_sigterm_p99_s', label: 'plain BullMQ SIGTERM (default) p99', value: round(pt.p99, 2), unit: 's' },
      {
        key: 'plain_recovery_p50_s',
        label: 'plain BullMQ SIGKILL recovery p50',
        value: round(pk.p50, 2),
        unit: 's',
        note: `${pk.n} trials`,
      },
      { key: 'plain_recovery_p99_s', label: 'plain BullMQ SIGKILL recovery p99', value: round(pk.p99, 2), unit: 's' },
      {
        key: 'recovery_p50_speedup',
        label: 'SIGKILL recovery p50, plain / engine',
        value: round(pk.p50 / recov.p50, 1),
        unit: 'x',
      },
      {
        key: 'handoff_p50_speedup',
        label: 'SIGTERM step restart p50, plain default / engine',
        value: round((pt.p50 * 1000) / handoff.p50, 0),
        unit: 'x',
      },
      {
        key: 'engine_runs_not_completed',
        label: 'engine runs not completed after the signal',
        value: notCompleted,
        unit: 'runs',
      },
    ];
    const lockS = env.cfg.LOCK_DURATION_MS / 1000;
    const stallS = env.cfg.STALLED_INTERVAL_MS / 1000;
    const rows: (string | number)[][] = [
      [
        'engine, SIGTERM -> step started on the other worker (ms)',
        ...fmtDist(handoff, 1),
        `moveToWait + WaitingError; victim exit ${round(termExits.p50, 0)} ms p50 (${badTermExit} not code 0)`,
      ],
      [
        'engine, SIGKILL -> step started on the other worker (s)',
        ...fmtDist(recov, 3),
        `owner watch every ${env.cfg.OWNER_WATCH_MS} ms, its probe every ${env.cfg.OWNER_PROBE_MS} ms: the victim's connection is gone -> requeueDeadOwner; lock ${lockS} s only bounds a frozen process`,
      ],
      [
        `engine ${LOCK_ONLY.label}, SIGKILL (s)`,
        ...fmtDist(lockOnlyRecov, 3),
        'the previous setting: lock expiry + stall check, at most ~2.4 s (one check per interval per queue across its workers)',
      ],
      [
        'engine, SIGSTOP -> step started on the other worker (s)',
        ...fmtDist(stopRecov, 2),
        `connection stays open: the watch leaves it; lock ${lockS} s (renewed every ${lockS / 2} s) + stall check every ${stallS} s: at most ~${round(lockS + 2 * stallS, 1)} s; then SIGCONT: ${stopped.filter((t) => t.journalOnce).length} of ${stopped.length} journals hold each step once`,
      ],
      [
        'plain BullMQ, SIGTERM, no handler (s)',
        ...fmtDist(pt, 2),
        `Node default: process dies (${plain.termExit}), job stalls${plain.missing.term ? `; ${plain.missing.term} not restarted in ${PLAIN_WAIT_MS / 1000} s` : ''}`,
      ],
      [
        'plain BullMQ, SIGKILL (s)',
        ...fmtDist(pk, 2),
        `lock 30 s (renewed every 7.5-15 s) + stall check every 30 s${plain.missing.kill ? `; ${plain.missing.kill} not restarted in ${PLAIN_WAIT_MS / 1000} s` : ''}`,
      ],
      [
        'plain BullMQ, SIGTERM + worker.close() handler (s)',
        ...fmtDist(pc, 2),
        `never handed over (${plain.closeHandedOver} of ${m} started elsewhere): close() waits for the step to finish in place; exit after ${round(plain.closeExitS, 2)} s`,
      ],
    ];
    return {
      name: this.name,
      title: this.title,
      metrics,
      tables: [
        {
          title:
            `Signal -> the held step starts on another worker process (processedOn - signal time). Engine: ${engine.length} sequential trials alternating SIGTERM/SIGKILL, ` +
            `real worker processes (src/server/worker.ts), step 2 (search_kb, with lookup_customer) held by a slow kb read. Plain BullMQ (default Worker options, processor holds the job): ` +
            `${n} + ${n} + ${m} trials run concurrently with the engine's, one queue and one job per trial; victim Workers took their jobs staggered over ${plain.staggerMs / 1000} s and rescuer Workers ` +
            `started their stall checkers staggered over ~30 s (spread lock/stall phases); all victim processes signalled at the same instant (${Math.ceil(n / 10)} + ${Math.ceil(n / 10)} + 1 processes, 10 Workers each). ` +
            'close() row: signal -> the job finished on the SAME worker (it is not handed over; a step longer than the pod grace period is SIGKILLed and stalls like the SIGKILL row).',
          header: ['case', 'n', 'p50', 'p90', 'p99', 'max', 'how'],
          rows,
        },
      ],
      details: {
        engine: engine.map((t) => ({ ...t, ms: t.ms })),
        lockOnly,
        stopped,
        plain: {
          killS: plain.kill,
          termS: plain.term,
          closeFinishedS: plain.closeFinished,
          closeHandedOver: plain.closeHandedOver,
          closeExitS: plain.closeExitS,
          termExit: plain.termExit,
          killExit: plain.killExit,
          missing: plain.missing,
        },
        settings: {
          engine: {
            lockDurationMs: env.cfg.LOCK_DURATION_MS,
            stalledIntervalMs: env.cfg.STALLED_INTERVAL_MS,
            ownerWatchMs: env.cfg.OWNER_WATCH_MS,
          },
          lockOnly: LOCK_ONLY.extra,
          plain: { lockDurationMs: 30_000, stalledIntervalMs: 30_000, lockRenewTimeMs: 15_000 },
        },
      },
    };
  },
};
