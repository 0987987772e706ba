/**
 * Gauges computed from Redis when /metrics is scraped (prom-client `collect()`),
 * on the Metrics' own registry, never the global one.
 *
 * Several processes (api, workers, reconciler) export the same values: the
 * alert rules take max(), never sum(). Cost per scrape is bounded by the shard
 * count, not by the data: per shard one pipeline of ZCARD x3 + ZRANGE 0 0
 * WITHSCORES x4 (all keys of a shard share its hash tag, so one cluster slot),
 * plus one getJobCounts per shard queue.
 *
 * The archive and compaction lags are read here, from the queues, not set by the
 * archiver's and compactor's passes: every process exports them, so a fleet whose
 * reconciler has stopped (or never ran) sees its ended runs wait, and
 * AgentArchiveLagging / AgentCompactionLagging fire; a gauge set only by the
 * passes would be absent then, and no alert would read it.
 *
 * agent_runs_by_status reads the listing indexes (src/runs/list.ts): one
 * pipeline of ZCARD/ZCOUNT per shard, one per status.
 */
import { Gauge } from 'prom-client';
import type { Logger } from 'pino';
import type { RedisClient } from '../store/connect.js';
import type { KeySpace } from '../store/keys.js';
import type { ShardQueues } from '../store/queues.js';
import type { Metrics } from '../metrics/metrics.js';
import { InvariantError } from '../core/errors.js';
import { countRunsByStatus } from './list.js';

export const QUEUE_STATES = ['waiting', 'active', 'delayed', 'completed', 'failed'] as const;

export interface ShardIndexStats {
  openActions: number;
  /** ms score of the oldest open action (dispatched or outcome_unknown), or undefined */
  openOldestMs: number | undefined;
  humanQueue: number;
  humanOldestMs: number | undefined;
  approvals: number;
  /** ms score of the oldest ended run waiting to be archived (its end), or undefined */
  archiveOldestMs: number | undefined;
  /**
   * ms score of the lowest entry of the compaction queue (a run's end, or a claim's lapse: a claim held now lies
   * ahead of the clock and reads as no wait), or undefined
   */
  compactOldestMs: number | undefined;
}

export type IndexStats = ShardIndexStats;

/** What the scrape reads (given by each process's context). */
interface ScrapeCtx {
  redis: RedisClient;
  keys: KeySpace;
  queues: ShardQueues;
  log: Logger;
}

function minDefined(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return Math.min(a, b);
}

function scoreOf(reply: unknown): number | undefined {
  // ZRANGE key 0 0 WITHSCORES -> [member, score] or []
  if (!Array.isArray(reply) || reply.length < 2) return undefined;
  const n = Number(reply[1]);
  return Number.isFinite(n) ? n : undefined;
}

/** ZCARD + ZRANGE 0 0 WITHSCORES of one shard's ledger indexes, in one pipeline (one slot). */
export async function shardIndexStats(ctx: ScrapeCtx, shard: number): Promise<ShardIndexStats> {
  const k = ctx.keys;
  const res = await ctx.redis
    .pipeline()
    .zcard(k.openActions(shard))
    .zrange(k.openActions(shard), 0, 0, 'WITHSCORES')
    .zcard(k.humanQueue(shard))
    .zrange(k.humanQueue(shard), 0, 0, 'WITHSCORES')
    .zcard(k.approvals(shard))
    .zrange(k.archiveQueue(shard), 0, 0, 'WITHSCORES')
    .zrange(k.compactQueue(shard), 0, 0, 'WITHSCORES')
    .exec();
  if (!res) throw new InvariantError('invariant', 'redis pipeline returned no result');
  for (const [err] of res) if (err) throw err;
  const v = res.map(([, r]) => r);
  return {
    openActions: Number(v[0] ?? 0),
    openOldestMs: scoreOf(v[1]),
    humanQueue: Number(v[2] ?? 0),
    humanOldestMs: scoreOf(v[3]),
    approvals: Number(v[4] ?? 0),
    archiveOldestMs: scoreOf(v[5]),
    compactOldestMs: scoreOf(v[6]),
  };
}

export async function indexStats(ctx: ScrapeCtx): Promise<IndexStats> {
  const shards = await Promise.all(ctx.keys.allShards().map((s) => shardIndexStats(ctx, s)));
  const out: IndexStats = {
    openActions: 0,
    openOldestMs: undefined,
    humanQueue: 0,
    humanOldestMs: undefined,
    approvals: 0,
    archiveOldestMs: undefined,
    compactOldestMs: undefined,
  };
  for (const s of shards) {
    out.openActions += s.openActions;
    out.openOldestMs = minDefined(out.openOldestMs, s.openOldestMs);
    out.humanQueue += s.humanQueue;
    out.humanOldestMs = minDefined(out.humanOldestMs, s.humanOldestMs);
    out.approvals += s.approvals;
    out.archiveOldestMs = minDefined(out.archiveOldestMs, s.archiveOldestMs);
    out.compactOldestMs = minDefined(out.compactOldestMs, s.compactOldestMs);
  }
  return out;
}

/**
 * Jobs per state, summed over the shard queues. Under flow control step jobs wait in BullMQ's prioritized set
 * (src/flow/stepPriority.ts): they are counted as waiting, which is what the scaling and queue alerts read.
 */
export async function queueJobCounts(ctx: ScrapeCtx): Promise<Record<(typeof QUEUE_STATES)[number], number>> {
  const per = await Promise.all(ctx.queues.all().map((q) => q.getJobCounts(...QUEUE_STATES, 'prioritized')));
  const sum = Object.fromEntries(QUEUE_STATES.map((s) => [s, 0])) as Record<(typeof QUEUE_STATES)[number], number>;
  for (const counts of per) {
    for (const s of QUEUE_STATES) sum[s] += counts[s] ?? 0;
    sum.waiting += counts.prioritized ?? 0;
  }
  return sum;
}

/** Runs in the version queue, summed over the shards (one ZCARD per shard). */
export async function versionQueueDepth(ctx: ScrapeCtx): Promise<number> {
  const counts = await Promise.all(ctx.keys.allShards().map((s) => ctx.redis.zcard(ctx.keys.versionQueue(s))));
  return counts.reduce((a, b) => a + b, 0);
}

const ageSeconds = (now: number, oldestMs: number | undefined): number =>
  oldestMs === undefined ? 0 : Math.max(0, (now - oldestMs) / 1000);

/**
 * Registers the scrape-time gauges on metrics.registry. Idempotent per Metrics
 * (a second call returns the gauges already registered). One scrape shares one
 * Redis read between the gauges fed by the ledger indexes.
 */
export interface RunStatusCounting {
  statuses: readonly string[];
  terminal: ReadonlySet<string>;
  /** A finished run's keys expire after this: older entries of a terminal status are not counted. */
  retentionMs: number;
}

export function registerScrapeCollectors(
  metrics: Metrics,
  ctx: ScrapeCtx,
  opts: { now?: () => number; runs?: RunStatusCounting } = {},
): ScrapeGauges {
  const existing = registered.get(metrics);
  if (existing) return existing;
  const now = opts.now ?? Date.now;
  const r = [metrics.registry];

  // One Redis read per scrape for the five index gauges: the first collect() starts it, the others await it.
  let pending: Promise<IndexStats> | undefined;
  const stats = (): Promise<IndexStats> => {
    if (!pending) {
      pending = indexStats(ctx);
      const clear = () => {
        pending = undefined;
      };
      pending.then(clear, clear);
    }
    return pending;
  };
  // A failed Redis read must not fail the whole scrape (the counters, duplicate writes first, would
  // vanish with it): the gauge keeps its last value, the error is logged and counted.
  const guarded = (name: string, fn: () => Promise<void>) => async () => {
    try {
      await fn();
    } catch (err) {
      metrics.scrapeErrors.inc({ collector: name });
      ctx.log.warn({ code: 'scrape_collect_failed', collector: name, err }, 'scrape-time gauge not refreshed');
    }
  };
  const fromStats = (name: string, pick: (s: IndexStats, t: number) => number) =>
    function (this: Gauge) {
      return guarded(name, async () => {
        this.set(pick(await stats(), now()));
      })();
    };

  const gauges: ScrapeGauges = {
    queueJobs: new Gauge({
      name: 'agent_queue_jobs',
      help: 'Step jobs per BullMQ state, summed over the shard queues',
      labelNames: ['state'],
      registers: r,
      collect() {
        return guarded('queue_jobs', async () => {
          const counts = await queueJobCounts(ctx);
          for (const s of QUEUE_STATES) this.set({ state: s }, counts[s]);
        })();
      },
    }),
    outcomeUnknownOpen: new Gauge({
      name: 'agent_outcome_unknown_open',
      help: 'Ledger entries dispatched or outcome_unknown and not yet settled (open-actions index)',
      registers: r,
      collect: fromStats('outcome_unknown_open', (s) => s.openActions),
    }),
    outcomeUnknownOldestAge: new Gauge({
      name: 'agent_outcome_unknown_oldest_age_seconds',
      help: 'Age of the oldest open (dispatched or outcome_unknown) ledger entry; 0 when none',
      registers: r,
      collect: fromStats('outcome_unknown_oldest_age', (s, t) => ageSeconds(t, s.openOldestMs)),
    }),
    humanQueueDepth: new Gauge({
      name: 'agent_human_queue_depth',
      help: 'Ledger entries waiting for a person (needs_human)',
      registers: r,
      collect: fromStats('human_queue_depth', (s) => s.humanQueue),
    }),
    humanQueueOldestAge: new Gauge({
      name: 'agent_human_queue_oldest_age_seconds',
      help: 'Age of the oldest entry of the human queue; 0 when empty',
      registers: r,
      collect: fromStats('human_queue_oldest_age', (s, t) => ageSeconds(t, s.humanOldestMs)),
    }),
    approvalsPending: new Gauge({
      name: 'agent_approvals_pending',
      help: 'Actions waiting for an approval',
      registers: r,
      collect: fromStats('approvals_pending', (s) => s.approvals),
    }),
    archiveLag: new Gauge({
      name: 'agent_archive_lag_seconds',
      help: 'Age of the oldest ended run not yet archived (its archive queue; 0 when none waits)',
      registers: r,
      collect: fromStats('archive_lag', (s, t) => ageSeconds(t, s.archiveOldestMs)),
    }),
    compactionLag: new Gauge({
      name: 'agent_compaction_lag_seconds',
      help:
        'How long the oldest ended run due for its compaction has waited (its compaction queue: since its end, or ' +
        "since a compactor's claim on it lapsed; 0 when none waits)",
      registers: r,
      collect: fromStats('compaction_lag', (s, t) => ageSeconds(t, s.compactOldestMs)),
    }),
    versionParkedRuns: new Gauge({
      name: 'agent_version_parked_runs',
      help: 'Runs parked needs_human / version_mismatch, waiting for an operator to continue or cancel them (the version queue)',
      registers: r,
      collect() {
        return guarded('version_parked_runs', async () => {
          this.set(await versionQueueDepth(ctx));
        })();
      },
    }),
    runsByStatus: new Gauge({
      name: 'agent_runs_by_status',
      help: 'Runs per status (listing indexes; a finished status counts runs still retained)',
      labelNames: ['status'],
      registers: r,
      collect() {
        const runs = opts.runs;
        if (!runs) return;
        return guarded('runs_by_status', async () => {
          const counts = await countRunsByStatus(
            ctx.redis,
            ctx.keys,
            runs.statuses,
            runs.terminal,
            runs.retentionMs,
            now(),
          );
          for (const [status, n] of Object.entries(counts)) this.set({ status }, n);
        })();
      },
    }),
  };
  registered.set(metrics, gauges);
  ctx.log.debug({ code: 'scrape_collectors_registered' }, 'scrape-time gauges registered');
  return gauges;
}

export interface ScrapeGauges {
  queueJobs: Gauge;
  outcomeUnknownOpen: Gauge;
  outcomeUnknownOldestAge: Gauge;
  humanQueueDepth: Gauge;
  humanQueueOldestAge: Gauge;
  approvalsPending: Gauge;
  archiveLag: Gauge;
  compactionLag: Gauge;
  versionParkedRuns: Gauge;
  runsByStatus: Gauge;
}

const registered = new WeakMap<Metrics, ScrapeGauges>();
