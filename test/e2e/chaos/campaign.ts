/**
 * The chaos campaign: a real Redis (AOF always), the sandbox with random
 * faults, N real worker processes killed (SIGKILL, also at named crash points),
 * SIGTERMed and replaced, Redis restarted; then faults off, drain, and every
 * invariant checked from Redis and the sandbox's own counts.
 *
 * Recovery time method: every 100 ms the campaign snapshots the active lists of
 * every shard queue with each job's processedOn and lock token. When a worker
 * dies by SIGKILL at time T, the jobs it held at the last snapshot before T
 * (their lock token starts with one of its BullMQ worker ids) are remembered; a
 * job whose processedOn later moves to a value > T was restarted by another
 * worker (stall recovery) and contributes (processedOn - T); the watched jobs'
 * hashes are read directly, since a recovered step may be active only for a
 * few ms. Jobs of live workers finish and are not restarted, so they do not
 * contribute.
 */
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../../src/config/config.js';
import { createContext } from '../../../src/server/buildContext.js';
import type { EngineContext } from '../../../src/runs/engineContext.js';
import { createLogger } from '../../../src/metrics/log.js';
import { newMetrics } from '../../../src/metrics/metrics.js';
import { startEmbeddedRedis, type EmbeddedRedis } from '../../../testkit/embeddedRedis.js';
import { startSandbox, type SandboxHandle } from '../../../sandbox/server.js';
import type { FaultRule } from '../../../sandbox/types.js';
import { mulberry32 } from '../../../sandbox/faults.js';
import { buildSpec } from '../../../src/producer/intake.js';
import { Ledger } from '../../../src/ledger/ledger.js';
import { Reconciler } from '../../../src/ledger/reconciler.js';
import { spawnWorker, type WorkerProcess } from '../../../testkit/processes.js';
import { until } from '../../../testkit/until.js';

/**
 * The points a support run passes: the step's seven and the SIGTERM grace (the streaming, observation and child-run
 * points are tested with the runs that pass them). A worker armed with `during_grace` dies only if the campaign
 * SIGTERMs it.
 */
export const CAMPAIGN_CRASH_POINTS = [
  'after_decision',
  'after_reservation',
  'after_dispatched',
  'after_call',
  'after_outcome',
  'before_commit',
  'after_commit',
  'during_grace',
] as const;

export interface CampaignOptions {
  runs: number;
  seconds: number;
  seed: number;
  workers: number;
  unsafe?: boolean;
  /** Mean seconds between external chaos actions (kill/sigterm). Default 1. */
  chaosEverySec?: number;
  /** Probability a replacement worker is armed with a crash point. Default 0.5. */
  crashPointProbability?: number;
  /** Probability an external action is SIGTERM (else SIGKILL). Default 0.3. */
  sigtermProbability?: number;
  redisRestarts?: number;
  drainSeconds?: number;
  log?: (msg: string) => void;
}

export interface RunProblem {
  runId: string;
  problem: string;
}

export interface CampaignResult {
  ok: boolean;
  unsafe: boolean;
  runs: number;
  completed: number;
  statuses: Record<string, number>;
  steps: number;
  effects: number;
  kills: Record<string, number>;
  killsTotal: number;
  sigterms: number;
  sigtermCleanExits: number;
  redisRestarts: number;
  duplicates: number;
  duplicateKeys: string[];
  lostRuns: RunProblem[];
  unknowns: { total: number; resolved: number; toHumans: number; unresolved: RunProblem[] };
  budgetBreaches: RunProblem[];
  journalProblems: RunProblem[];
  recoveryMs: { samples: number; p50: number; p99: number; max: number };
  workersSpawned: number;
  /** Workers that could not reach Redis within REDIS_BOOT_TIMEOUT_MS (a restart in progress) and exited 1, as they must; replaced like a restart policy would. */
  bootRetries: number;
  durationMs: number;
  failures: string[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pct = (xs: number[], p: number) => {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
};

/** A campaign worker and what the campaign itself did to it. */
export interface ChaosWorker extends WorkerProcess {
  /** Set when the campaign itself sent the signal. */
  sent?: 'SIGKILL' | 'SIGTERM';
  sentAt?: number;
  /** The campaign's final stop (not a chaos SIGTERM). */
  final?: boolean;
}

const TERMINAL = new Set(['completed', 'needs_human', 'budget_exceeded', 'failed', 'cancelled']);

export async function runCampaign(opts: CampaignOptions): Promise<CampaignResult> {
  const t0 = Date.now();
  const log = opts.log ?? (() => {});
  const rnd = mulberry32(opts.seed || 1);
  const unsafe = opts.unsafe ?? false;
  const chaosEveryMs = (opts.chaosEverySec ?? 1) * 1000;
  const crashP = opts.crashPointProbability ?? 0.5;
  const termP = opts.sigtermProbability ?? 0.3;
  const restartsWanted = opts.redisRestarts ?? 3;
  const drainMs = (opts.drainSeconds ?? 90) * 1000;

  const redis: EmbeddedRedis = await startEmbeddedRedis({ appendfsync: 'always' });
  const sandbox: SandboxHandle = await startSandbox({ port: 0, seed: opts.seed });
  const prefix = `chaos${randomBytes(4).toString('hex')}`;
  const env: Record<string, string> = {
    REDIS_URL: redis.url,
    KEY_PREFIX: prefix,
    BULL_PREFIX: `${prefix}b`,
    SANDBOX_URL: sandbox.url,
    LOCK_DURATION_MS: '1000',
    STALLED_INTERVAL_MS: '500',
    MAX_STALLED_COUNT: '1000',
    WORKER_CONCURRENCY: '10',
    RETRY_BASE_MS: '20',
    RETRY_MAX_MS: '500',
    SHUTDOWN_GRACE_MS: '5000',
    RECONCILER_MIN_AGE_MS: '2000',
    RECONCILE_DEADLINE_MS: '5000',
    RECONCILE_POLL_MS: '100',
    RECONCILER_SWEEP_MS: '500',
    ...(unsafe ? { UNSAFE_DISABLE_IDEMPOTENCY: 'true' } : {}),
  };
  const cfg = loadConfig({ ...env, LOG_LEVEL: 'silent' });
  const ctx: EngineContext = await createContext(cfg, 'chaos', {
    log: createLogger('chaos', 'silent'),
    metrics: newMetrics(),
  });
  const reconciler = new Reconciler(ctx, 'reconciler:chaos');

  const faults: FaultRule[] = [];
  for (const resource of ['tickets', 'emails']) {
    faults.push(
      // The negative control makes lost responses common: each one is a blind resend against a key-ignoring service.
      { kind: 'lost_response_after_commit', resource, probability: unsafe ? 0.3 : 0.05 },
      { kind: 'refuse_before_commit', resource, probability: 0.05 },
      { kind: 'rate_limit', resource, probability: 0.05 },
      { kind: 'slow_commit', resource, probability: 0.05, ms: 800 },
    );
  }
  if (unsafe) faults.push({ kind: 'ignore_keys' });
  sandbox.setFaults(faults);

  const kills: Record<string, number> = Object.fromEntries([...CAMPAIGN_CRASH_POINTS, 'external'].map((p) => [p, 0]));
  let sigterms = 0,
    sigtermCleanExits = 0,
    redisRestarts = 0,
    workersSpawned = 0,
    bootRetries = 0;
  const failures: string[] = [];
  const fleet: (ChaosWorker | undefined)[] = Array.from({ length: opts.workers }, () => undefined);
  const allExits: Promise<unknown>[] = [];
  let chaosOn = true;
  const killTimes: { at: number; bullIds: string[] }[] = [];

  const spawning = new Set<number>();
  const replaceDead = () => {
    for (let i = 0; i < fleet.length; i++) {
      if ((fleet[i] && !fleet[i]!.dead) || spawning.has(i)) continue;
      fleet[i] = undefined;
      spawning.add(i);
      void spawnInto(i).finally(() => spawning.delete(i));
    }
  };
  const spawnInto = async (slot: number): Promise<void> => {
    // Unsafe mode bypasses the ledger, so only the step processor's points are reachable; before_commit redelivers a done effect.
    // (@4 / @5: the create_ticket and send_email steps of the support script.)
    const points: readonly string[] = unsafe ? ['before_commit@4', 'before_commit@5'] : CAMPAIGN_CRASH_POINTS;
    const armed = chaosOn && rnd() < crashP ? points[Math.floor(rnd() * points.length)] : undefined;
    try {
      const w: ChaosWorker = await spawnWorker(env, {
        ...(armed ? { crashPoint: armed } : {}),
        keep: 'lifecycle',
        exitBeforeStart: 'return',
      });
      workersSpawned++;
      fleet[slot] = w;
      allExits.push(
        w.exited.then((e) => {
          if (e.signal === 'SIGKILL' && w.final) {
            // disarmed at the drain: not a chaos kill
          } else if (e.signal === 'SIGKILL') {
            killTimes.push({ at: w.sentAt ?? e.at, bullIds: w.bullIds });
            if (w.sent === 'SIGKILL') kills.external!++;
            else if (w.crashPoint) {
              const point = w.crashPoint.split('@')[0]!;
              kills[point] = (kills[point] ?? 0) + 1;
            } else failures.push(`worker ${w.pid} died of SIGKILL nobody sent`);
          } else if (w.sent === 'SIGTERM' && w.final) {
            if (e.code !== 0)
              failures.push(`worker ${w.pid} exited code=${e.code} signal=${e.signal} at the final stop`);
          } else if (w.sent === 'SIGTERM') {
            if (e.code === 0 && e.at - w.sentAt! < 10_000) sigtermCleanExits++;
            else
              failures.push(
                `worker ${w.pid} exited code=${e.code} signal=${e.signal} ${e.at - w.sentAt!}ms after SIGTERM: ${w.lines.slice(-2).join(' | ')}`,
              );
          } else if (e.code === 1 && w.bullIds.length === 0 && w.lines.some((l) => l.includes('[redis_unreachable]'))) {
            // Started while Redis was restarting: it gave up at its boot deadline with one line, as it must
            // (no endless retry loop); the refill replaces it, as a Deployment's restart policy would.
            bootRetries++;
          } else {
            failures.push(
              `worker ${w.pid} exited code=${e.code} signal=${e.signal} unprompted: ${w.lines.slice(-3).join(' | ')}`,
            );
          }
        }),
      );
    } catch (err) {
      log(`spawn failed: ${(err as Error).message.slice(0, 300)}`);
    }
  };

  // Runs are enqueued steadily over the first 80% of the chaos phase, so kills land on live work throughout.
  const runIds: string[] = [];
  const createRun = async (i: number) => {
    const ticket = {
      id: `CH-${opts.seed}-${i}`,
      subject: `Order ${i} arrived broken`,
      body: 'The mug was shattered.',
      customer: { email: `c${i}@example.com`, name: `Customer ${i}` },
    };
    const spec = buildSpec(ctx, { tenant: 'acme', ticket, budget: { maxSteps: 12, maxTokens: 20_000 } }, Date.now());
    // Redis may be restarting: the create is tried again until it answers.
    const created = () =>
      ctx.store.create(spec, Date.now()).then(
        () => true,
        () => false,
      );
    await until(`run ${spec.runId} created`, 60_000, created, 200);
    runIds.push(spec.runId);
  };
  const producer = (async () => {
    const spanMs = opts.seconds * 800;
    const start = Date.now();
    for (let i = 0; i < opts.runs; i++) {
      const due = start + (i * spanMs) / opts.runs;
      if (due > Date.now()) await sleep(due - Date.now()); // the campaign's schedule of arrivals
      await createRun(i);
    }
    log(`created ${runIds.length} runs under ${prefix}`);
  })();

  // Recovery-time sampler.
  type Snap = Map<string, { processedOn: number; lock: string }>;
  let lastSnap: Snap = new Map();
  const watched = new Map<string, { since: number; before: number }>();
  const recoveries: number[] = [];
  let sampling = true;
  const sampler = (async () => {
    const bull = ctx.keys.bullPrefix;
    while (sampling) {
      try {
        const snap: Snap = new Map();
        for (const shard of ctx.keys.allShards()) {
          const q = `${bull}:${ctx.keys.queueName(shard)}`;
          const ids = await ctx.redis.lrange(`${q}:active`, 0, -1);
          if (ids.length) {
            const pipe = ctx.redis.pipeline();
            for (const id of ids) pipe.hget(`${q}:${id}`, 'processedOn').get(`${q}:${id}:lock`);
            const res = (await pipe.exec()) ?? [];
            ids.forEach((id, i) =>
              snap.set(`${shard}|${id}`, {
                processedOn: Number(res[2 * i]?.[1] ?? 0),
                lock: String(res[2 * i + 1]?.[1] ?? ''),
              }),
            );
          }
        }
        lastSnap = snap;
        // A recovered step is often active for only a few ms, so read the watched jobs' hashes
        // (completed step jobs are kept for an hour) rather than the active list.
        if (watched.size) {
          const keys = [...watched.keys()];
          const pipe = ctx.redis.pipeline();
          for (const k of keys) {
            const [shard, id] = k.split('|');
            pipe.hget(`${bull}:${ctx.keys.queueName(Number(shard))}:${id}`, 'processedOn');
          }
          const res = (await pipe.exec()) ?? [];
          keys.forEach((k, i) => {
            const w = watched.get(k)!;
            const p = Number(res[i]?.[1] ?? 0);
            if (p > w.before && p > w.since) {
              recoveries.push(p - w.since);
              watched.delete(k);
            } else if (Date.now() - w.since > 60_000) watched.delete(k);
          });
        }
      } catch {
        /* redis restarting */
      }
      await sleep(100); // the sampler's period, while the campaign runs
    }
  })();
  // Only the jobs whose lock token belongs to the killed process (token = `<base>@<client id>:<n>`, the
  // BullMQ worker id logged at start is `<base>@<client id>`; the client id changes when the connection does).
  const noteKill = (kill: { at: number; bullIds: string[] }) => {
    for (const [k, j] of lastSnap) {
      if (watched.has(k) || !kill.bullIds.some((id) => j.lock.startsWith(`${id.split('@')[0]}@`))) continue;
      watched.set(k, { since: kill.at, before: j.processedOn });
    }
  };
  let seenKills = 0;

  await Promise.all(fleet.map((_, i) => spawnInto(i)));
  reconciler.start();

  // Chaos phase.
  const chaosEnd = Date.now() + opts.seconds * 1000;
  const restartAt = Array.from(
    { length: restartsWanted },
    (_, i) => Date.now() + ((i + 1) * opts.seconds * 1000) / (restartsWanted + 1),
  );
  let nextAction = Date.now() + chaosEveryMs * (0.5 + rnd());
  while (Date.now() < chaosEnd) {
    while (killTimes.length > seenKills) noteKill(killTimes[seenKills++]!);
    // Replacements start in the background (a tsx process takes a second or two): chaos goes on meanwhile.
    replaceDead();
    if (restartAt.length && Date.now() >= restartAt[0]!) {
      restartAt.shift();
      log('restarting redis');
      await redis.restart();
      redisRestarts++;
    }
    if (Date.now() >= nextAction) {
      nextAction = Date.now() + chaosEveryMs * (0.5 + rnd());
      const live = fleet.map((w, i) => ({ w, i })).filter((x) => x.w && !x.w.dead && !x.w.sent);
      if (live.length) {
        const { w } = live[Math.floor(rnd() * live.length)]!;
        const sig = rnd() < termP ? 'SIGTERM' : 'SIGKILL';
        w!.sent = sig;
        w!.sentAt = Date.now();
        if (sig === 'SIGTERM') sigterms++;
        w!.child.kill(sig);
      }
    }
    await sleep(50); // the chaos loop's tick: its schedule of kills and restarts
  }
  await producer;
  const totalKillsSoFar = () => Object.values(kills).reduce((a, b) => a + b, 0);
  log(`chaos over: kills=${totalKillsSoFar()} sigterms=${sigterms} restarts=${redisRestarts}; draining`);

  // Drain: faults off, clean workers, until every run is terminal.
  chaosOn = false;
  sandbox.clearFaults();
  if (unsafe) sandbox.setFaults([{ kind: 'ignore_keys' }]);
  await until('replacements started', 120_000, () => spawning.size === 0, 50);
  for (let i = 0; i < fleet.length; i++) {
    const w = fleet[i];
    if (w && !w.dead && w.crashPoint) {
      w.final = true;
      w.sent = 'SIGKILL';
      w.sentAt = Date.now();
      w.child.kill('SIGKILL');
      await w.exited;
    }
  }
  const ledger = new Ledger(ctx.redis, ctx.keys);
  const drained = async () => {
    while (killTimes.length > seenKills) noteKill(killTimes[seenKills++]!);
    replaceDead();
    const pipe = ctx.redis.pipeline();
    for (const id of runIds) pipe.hget(ctx.keys.run(id).run, 'status');
    const st = ((await pipe.exec()) ?? []).map((r) => String(r[1] ?? ''));
    return st.every((s) => TERMINAL.has(s));
  };
  // A run left unended is reported below, with what it was doing.
  await until('every run ended', drainMs, drained, 250).catch(() => {});
  // The reconciler settles what is still open (an effect dispatched, or of unknown outcome) once it is
  // RECONCILER_MIN_AGE_MS old: wait for that, not for a fixed time (what stays open is reported below).
  const open = async (runId: string) =>
    (await ledger.listForRun(runId)).some((a) => a.state === 'dispatched' || a.state === 'outcome_unknown');
  const settled = async () => !(await Promise.all(runIds.map(open))).some(Boolean);
  await until('no effect left open', Number(env.RECONCILER_MIN_AGE_MS) + 15_000, settled, 250).catch(() => {});
  sampling = false;
  await sampler;

  await until('replacements started', 120_000, () => spawning.size === 0, 50);
  // Stop the fleet (SIGTERM, counted separately from the campaign's).
  for (const w of fleet)
    if (w && !w.dead) {
      w.final = true;
      w.sent = 'SIGTERM';
      w.sentAt = Date.now();
      w.child.kill('SIGTERM');
    }
  await Promise.race([Promise.all(allExits), sleep(15_000)]);
  for (const w of fleet) if (w && !w.dead) w.child.kill('SIGKILL');
  await reconciler.stop();

  // Check invariants.
  const counts = sandbox.counts();
  const duplicateKeys: string[] = [];
  let duplicates = 0,
    effects = 0;
  for (const [res, rc] of Object.entries(counts.byResource)) {
    effects += rc.records;
    for (const [key, n] of Object.entries(rc.byKey))
      if (n > 1) {
        duplicates += n - 1;
        duplicateKeys.push(`${res}:${key}x${n}`);
      }
  }
  const statuses: Record<string, number> = {};
  const lostRuns: RunProblem[] = [],
    budgetBreaches: RunProblem[] = [],
    journalProblems: RunProblem[] = [];
  const unknowns = { total: 0, resolved: 0, toHumans: 0, unresolved: [] as RunProblem[] };
  let steps = 0;
  for (const runId of runIds) {
    const [state, spec] = await Promise.all([ctx.store.readState(runId), ctx.store.readSpec(runId)]);
    if (!state || !spec) {
      lostRuns.push({ runId, problem: 'run missing' });
      continue;
    }
    statuses[state.status] = (statuses[state.status] ?? 0) + 1;
    if (state.status !== 'completed') {
      if (!['needs_human', 'budget_exceeded', 'failed'].includes(state.status) || !state.reason)
        lostRuns.push({
          runId,
          problem: `status=${state.status} reason=${state.reason || '(none)'} cursor=${state.cursor}`,
        });
    }
    steps += state.used.steps;
    if (state.used.tokens > spec.limits.maxTokens || state.used.steps > spec.limits.maxSteps)
      budgetBreaches.push({
        runId,
        problem: `used ${state.used.steps} steps/${state.used.tokens} tokens of ${spec.limits.maxSteps}/${spec.limits.maxTokens}`,
      });
    const decisions = (await ctx.store.transcript(runId)).filter((e) => e.kind === 'decision').map((e) => e.step);
    const expected = Array.from({ length: decisions.length }, (_, i) => i + 1);
    if (decisions.join(',') !== expected.join(','))
      journalProblems.push({ runId, problem: `decisions ${decisions.join(',')}` });
    if (!unsafe) {
      const shard = ctx.keys.shardOf(runId);
      for (const a of await ledger.listForRun(runId)) {
        const wasUnknown = a.history.some((h) => h.to === 'outcome_unknown' || h.to === 'dispatched');
        if (!wasUnknown) continue;
        const everUnknown = a.history.some((h) => h.to === 'outcome_unknown');
        if (a.state === 'dispatched' || a.state === 'outcome_unknown') {
          unknowns.total++;
          unknowns.unresolved.push({ runId, problem: `${a.actionId} ${a.tool} still ${a.state}` });
          continue;
        }
        if (!everUnknown) continue; // dispatched -> confirmed directly: the normal path
        unknowns.total++;
        if (a.state === 'needs_human') {
          const inQueue = (await ctx.redis.zscore(ctx.keys.humanQueue(shard), a.actionId)) !== null;
          if (inQueue) unknowns.toHumans++;
          else unknowns.unresolved.push({ runId, problem: `${a.actionId} needs_human but not in the human queue` });
        } else if (a.state === 'confirmed' || a.state === 'safe_retry') {
          const last = [...a.history].reverse().find((h) => h.from === 'outcome_unknown');
          if (last && (last.evidence !== undefined || a.state === 'confirmed')) unknowns.resolved++;
          else unknowns.unresolved.push({ runId, problem: `${a.actionId} ${a.state} without evidence` });
        } else unknowns.resolved++; // compensation_required: resolved with a decision
      }
    }
  }
  const completed = statuses.completed ?? 0;
  const recoveryMs = {
    samples: recoveries.length,
    p50: pct(recoveries, 50),
    p99: pct(recoveries, 99),
    max: recoveries.length ? Math.max(...recoveries) : 0,
  };
  const result: CampaignResult = {
    ok: false,
    unsafe,
    runs: runIds.length,
    completed,
    statuses,
    steps,
    effects,
    kills,
    killsTotal: totalKillsSoFar(),
    sigterms,
    sigtermCleanExits,
    redisRestarts,
    duplicates,
    duplicateKeys,
    lostRuns,
    unknowns,
    budgetBreaches,
    journalProblems,
    recoveryMs,
    workersSpawned,
    bootRetries,
    durationMs: Date.now() - t0,
    failures,
  };
  const invariantsHold =
    duplicates === 0 &&
    lostRuns.length === 0 &&
    unknowns.unresolved.length === 0 &&
    budgetBreaches.length === 0 &&
    journalProblems.length === 0;
  result.ok = unsafe ? duplicates > 0 : invariantsHold && failures.length === 0;

  await ctx.close();
  await sandbox.close();
  await redis.stop();
  return result;
}

export function formatResult(r: CampaignResult): string {
  const rows: [string, string | number][] = [
    ['mode', r.unsafe ? 'UNSAFE (negative control)' : 'safe'],
    ['runs', r.runs],
    ['completed', r.completed],
    ['statuses', JSON.stringify(r.statuses)],
    ['steps', r.steps],
    ['effects', r.effects],
    ...Object.entries(r.kills).map(([p, n]) => [`kills ${p}`, n] as [string, number]),
    ['kills total', r.killsTotal],
    ['SIGTERMs (clean exits)', `${r.sigterms} (${r.sigtermCleanExits})`],
    ['redis restarts', r.redisRestarts],
    ['workers spawned', r.workersSpawned],
    ['boot retries (Redis down at start)', r.bootRetries],
    ['duplicates', r.duplicates],
    ['lost runs', r.lostRuns.length],
    [
      'unknowns (resolved / to humans / unresolved)',
      `${r.unknowns.total} (${r.unknowns.resolved} / ${r.unknowns.toHumans} / ${r.unknowns.unresolved.length})`,
    ],
    ['budget breaches', r.budgetBreaches.length],
    ['journal problems', r.journalProblems.length],
    [
      'recovery ms p50 / p99 / max (n)',
      `${r.recoveryMs.p50} / ${r.recoveryMs.p99} / ${r.recoveryMs.max} (${r.recoveryMs.samples})`,
    ],
    ['process failures', r.failures.length],
    ['duration s', (r.durationMs / 1000).toFixed(1)],
    ['RESULT', r.ok ? 'PASS' : 'FAIL'],
  ];
  const w = Math.max(...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `${k.padEnd(w)}  ${v}`).join('\n');
}
