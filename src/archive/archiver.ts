/**
 * The archiver: copies every ended run to PostgreSQL and lets Redis expire it only after the copy is committed.
 *
 * A run that ends with an archive configured is put on its shard's archive queue by the script that ends it and gets
 * no TTL (src/store/archiveQueue.ts). Each pass takes the oldest entries of every shard's queue; for each run, under
 * its lease (redlock, one archiver per run at a time; an efficiency guard only), it reads the run (snapshot.ts),
 * writes its row (INSERT ... ON CONFLICT on the run id: the same copy twice is one row), then marks the run archived,
 * sets its keys' retention and dequeues it in one script (archiveCommitted-6.lua), fenced by the run's end and
 * erasure times and its revision as read. A process killed anywhere leaves the run queued (before the mark) and the
 * next pass copies it again, changing nothing in the archive; a run retried and ended again meanwhile is copied again,
 * its row replaced. So is a run changed after its end (an action that waited for a person settled by their finding, the
 * finding journalled): the script that changes it counts its revision up and, once archived, queues it again with its
 * keys kept (includes/expireRun.lua, reviseEndedRun), so the archive never keeps the run as it was at its end when
 * Redis has let the change go. Runs in the archive older than ARCHIVE_RETENTION_DAYS are deleted by the same loop.
 */
import Redlock from 'redlock';
import type { EngineContext } from '../runs/engineContext.js';
import { archiveCommittedCall, type ArchiveCommitOutcome } from '../store/calls/archiveCommitted.js';
import { isTerminal } from '../core/status.js';
import { deleteArchivedBefore, upsertArchivedRun, type ArchivePool } from './db.js';
import { snapshotRun, type RunSnapshot, type RunViewOf } from './snapshot.js';
import { PassLoop } from '../core/passLoop.js';

export interface ArchivePassReport {
  archived: number;
  /** The row was already there (a copy after a kill between the commit and the mark). */
  unchanged: number;
  /** Left for the next pass: taken by another archiver, changed while copied, or failed. */
  deferred: number;
  /** Dequeued without a copy: at work again (retried) or gone. */
  dropped: number;
  failed: number;
  /** Seconds since the oldest queued run ended (0: none queued). */
  lagSeconds: number;
}

export type ArchiveContext = Pick<EngineContext, 'redis' | 'keys' | 'cfg' | 'log' | 'metrics'>;

const RETENTION_SWEEP_MS = 60_000;
const DAY_MS = 24 * 3600_000;

export class Archiver {
  private readonly redlock: Redlock;
  private readonly loop: PassLoop;
  private lastRetentionSweep = 0;

  constructor(
    private readonly ctx: ArchiveContext,
    private readonly pool: ArchivePool,
    private readonly viewOf: RunViewOf,
    private readonly id = `archiver:${process.pid}`,
  ) {
    this.redlock = new Redlock([ctx.redis], { retryCount: 0 });
    this.redlock.on('clientError', () => {});
    this.loop = new PassLoop({
      pass: () => this.pass(),
      intervalMs: () => ctx.cfg.ARCHIVE_INTERVAL_MS,
      onError: (err) => {
        ctx.metrics.archiveFailures.inc({ stage: 'pass' });
        ctx.log.warn({ code: 'archive_pass_failed', err }, 'archive pass failed');
      },
    });
  }

  /** Whether its passes run (started, not stopped). */
  get ready(): boolean {
    return this.loop.running;
  }

  /** One pass over every shard's queue (safe to run in several processes at once). */
  async pass(nowMs = Date.now()): Promise<ArchivePassReport> {
    const report: ArchivePassReport = { archived: 0, unchanged: 0, deferred: 0, dropped: 0, failed: 0, lagSeconds: 0 };
    let oldest = Infinity;
    for (const shard of this.ctx.keys.allShards()) {
      const queue = this.ctx.keys.archiveQueue(shard);
      const flat = await this.ctx.redis.zrange(queue, 0, this.ctx.cfg.ARCHIVE_BATCH - 1, 'WITHSCORES');
      for (let i = 0; i < flat.length; i += 2) {
        oldest = Math.min(oldest, Number(flat[i + 1]));
        const outcome = await this.archiveLeased(flat[i]!, queue);
        report[outcome]++;
      }
    }
    // The lag counts what is still queued after the pass (what this pass copied is no longer behind).
    oldest = await this.oldestQueued();
    report.lagSeconds = Number.isFinite(oldest) ? Math.max(0, (nowMs - oldest) / 1000) : 0;
    await this.sweepRetention(nowMs);
    return report;
  }

  /** Ms of the oldest end still queued on any shard (Infinity: none). */
  async oldestQueued(): Promise<number> {
    let oldest = Infinity;
    for (const shard of this.ctx.keys.allShards()) {
      const first = await this.ctx.redis.zrange(this.ctx.keys.archiveQueue(shard), 0, 0, 'WITHSCORES');
      if (first[1] !== undefined) oldest = Math.min(oldest, Number(first[1]));
    }
    return oldest;
  }

  private async archiveLeased(runId: string, queue: string): Promise<Exclude<keyof ArchivePassReport, 'lagSeconds'>> {
    let lock;
    try {
      lock = await this.redlock.lock(this.ctx.keys.archiveLease(runId), this.ctx.cfg.ARCHIVE_LEASE_MS);
    } catch {
      return 'deferred'; // another archiver holds it
    }
    try {
      return await this.archiveOne(runId, queue);
    } catch (err) {
      this.ctx.metrics.archiveFailures.inc({ stage: stageOf(err) });
      this.ctx.log.warn({ code: 'archive_failed', runId, err }, 'archive of a run failed; it stays queued');
      return 'failed';
    } finally {
      await lock.unlock().catch(() => {});
    }
  }

  /** Copies one run and marks it (see the module's comment). */
  async archiveOne(runId: string, queue: string): Promise<'archived' | 'unchanged' | 'deferred' | 'dropped'> {
    const snap = await snapshotRun(this.ctx, runId, this.viewOf).catch((err: unknown) => {
      throw tagged(err, 'read');
    });
    const k = this.ctx.keys.run(runId);
    const mark = (
      r: Pick<RunSnapshot['record'], 'finishedAt' | 'erasedAt' | 'revision'>,
    ): Promise<ArchiveCommitOutcome> =>
      archiveCommittedCall(this.ctx.redis, k, queue, {
        runId,
        finishedAt: r.finishedAt,
        erasedAt: r.erasedAt,
        revision: r.revision,
        retentionMs: this.ctx.cfg.RUN_RETENTION_MS,
        now: Date.now(),
      });
    if (!snap || !isTerminal(snap.record.status)) {
      // Gone, or at work again: the script dequeues it (its next end queues it again).
      const outcome = await mark(snap?.record ?? { finishedAt: 0, erasedAt: undefined, revision: 0 });
      return outcome === 'changed' ? 'deferred' : 'dropped';
    }
    const written = await upsertArchivedRun(this.pool, snap.row).catch((err: unknown) => {
      throw tagged(err, 'write');
    });
    const outcome = await mark(snap.record);
    if (outcome === 'changed') return 'deferred';
    if (outcome !== 'marked') return 'dropped';
    this.ctx.metrics.archivedRuns.inc();
    this.ctx.log.info({ code: 'run_archived', runId, written }, 'run archived');
    return written ? 'archived' : 'unchanged';
  }

  private async sweepRetention(nowMs: number): Promise<void> {
    const days = this.ctx.cfg.ARCHIVE_RETENTION_DAYS;
    if (days === 0 || nowMs - this.lastRetentionSweep < RETENTION_SWEEP_MS) return;
    this.lastRetentionSweep = nowMs;
    try {
      let deleted = 0;
      for (let n = 1000; n === 1000; deleted += n) n = await deleteArchivedBefore(this.pool, nowMs - days * DAY_MS);
      if (deleted > 0)
        this.ctx.log.info({ code: 'archive_retention_deleted', deleted }, 'archived runs past retention deleted');
    } catch (err) {
      this.ctx.metrics.archiveFailures.inc({ stage: 'retention' });
      this.ctx.log.warn({ code: 'archive_retention_failed', err }, 'archive retention sweep failed');
    }
  }

  /** Passes every ARCHIVE_INTERVAL_MS until stop(). */
  start(): void {
    this.loop.start();
  }

  /** No pass after it; the one in flight ends first. */
  stop(): Promise<void> {
    return this.loop.stop();
  }
}

function tagged(err: unknown, stage: string): unknown {
  if (err !== null && typeof err === 'object') (err as { archiveStage?: string }).archiveStage = stage;
  return err;
}

function stageOf(err: unknown): string {
  return (err as { archiveStage?: string } | null)?.archiveStage ?? 'mark';
}
