/**
 * The upgrade path of operators' compensations. The release before the human-queue sweep (Reconciler.
 * sweepCompensations) took an original out of its shard's human queue when its compensation was ordered; since then
 * ledgerTransition-6.lua keeps it there until the compensation is confirmed and the run has ended. An original that
 * release left in compensation_required with its compensation unfinished (planned, authorized or safe_retry after a
 * 429 or a crash; confirmed with the run never ended) is in no index: its run stays needs_human, nothing is listed,
 * and the sweep never sees it.
 *
 * The reconciler walks each shard's needs_human runs (the listing's status index, includes/runIndex.lua: those runs
 * only, never the keyspace), reads their actions, and puts each such original back in the human queue with the score
 * the ledger gave it (the ms of its move to compensation_required, its updatedAt), where the same sweep then finishes
 * it. Left out: an original the finding `accept` closed (its compensation_required -> compensation_required move; its
 * run went on at work and parked again), and one whose compensation was delivered before its run's park (the run was
 * at work then, went on, and parked again for something else: the queue let it go, Compensations.drive).
 *
 * A walk starts at the reconciler's first sweep and then once an hour, each sweep reading at most SCAN_PAGES pages of
 * a shard's index and resuming the next. No stored marker: a walk costs one read of each needs_human run's actions,
 * and during a rollout a process of the release before still orders compensations the old way after the first walk.
 * Nothing found, nothing written. An original requeued as a request finished its compensation is removed again by
 * the next sweep (its run has ended: Compensations.drive).
 */
import type { EngineContext } from '../runs/engineContext.js';
import type { Ledger } from './ledger.js';
import { deliveryRefused } from './compensation.js';

/** Runs ZSCAN is asked for per page, pages per shard per sweep, and the time from one walk's start to the next. */
const SCAN_COUNT = 100;
const SCAN_PAGES = 10;
const WALK_EVERY_MS = 60 * 60_000;

export interface RequeueReport {
  compensations: { requeued: number };
}

/** One original's check, kept apart by the caller (a failure is named and counted, the walk goes on). */
export type Apart = (actionId: string, check: () => Promise<void>) => Promise<void>;

export class CompensationRequeue {
  /** Per shard, the ZSCAN cursor of the walk under way; a shard absent has finished it. */
  private readonly cursors = new Map<number, string>();
  private nextWalkAt = 0;

  constructor(
    private readonly ctx: Pick<EngineContext, 'redis' | 'keys' | 'log' | 'metrics'>,
    private readonly ledger: Ledger,
  ) {}

  /** At each sweep's start: a new walk of every shard once the last has finished and one is due. */
  begin(nowMs: number): void {
    if (this.cursors.size > 0 || nowMs < this.nextWalkAt) return;
    for (const shard of this.ctx.keys.allShards()) this.cursors.set(shard, '0');
    this.nextWalkAt = nowMs + WALK_EVERY_MS;
  }

  /** The shard's part of the walk under way, SCAN_PAGES pages at most. */
  async shard(shard: number, report: RequeueReport, apart: Apart): Promise<void> {
    const from = this.cursors.get(shard);
    if (from === undefined) return;
    let cursor: string = from;
    const index = this.ctx.keys.runsByStatus(shard, 'needs_human');
    for (let page = 0; page < SCAN_PAGES; page++) {
      const [next, flat] = await this.ctx.redis.zscan(index, cursor, 'COUNT', SCAN_COUNT);
      for (let i = 0; i < flat.length; i += 2) await this.run(shard, flat[i]!, Number(flat[i + 1]), report, apart);
      cursor = next;
      if (cursor === '0') {
        this.cursors.delete(shard);
        return;
      }
    }
    this.cursors.set(shard, cursor);
  }

  /** A needs_human run (parked at `parkedAt`, ms): its originals in compensation_required, each checked. */
  private async run(shard: number, runId: string, parkedAt: number, report: RequeueReport, apart: Apart) {
    const actionKeys = await this.ctx.redis.smembers(this.ctx.keys.run(runId).actions);
    if (actionKeys.length === 0) return;
    const pipe = this.ctx.redis.pipeline();
    for (const key of actionKeys) pipe.hmget(key, 'state', 'actionId');
    for (const [err, row] of (await pipe.exec()) ?? []) {
      if (err) throw err;
      const [state, actionId] = row as (string | null)[];
      if (state === 'compensation_required' && actionId)
        await apart(actionId, () => this.original(shard, runId, actionId, parkedAt, report));
    }
  }

  private async original(shard: number, runId: string, actionId: string, parkedAt: number, report: RequeueReport) {
    const original = await this.ledger.get(runId, actionId);
    if (original?.state !== 'compensation_required' || !original.compensatedBy) return;
    if (await this.ledger.inHumanQueue(runId, actionId)) return;
    const comp = await this.ledger.get(runId, original.compensatedBy);
    // Nothing to finish (the sweep would refuse it at every pass).
    if (!comp) return;
    if (comp.state === 'confirmed' && !deliveryRefused(comp) && parkedAt > comp.updatedAt) return;
    const moves = await this.ledger.history(runId, actionId);
    if (moves.some((m) => m.from === 'compensation_required' && m.to === 'compensation_required')) return;
    // NX: an entry written meanwhile (a move of this release) keeps its own score.
    const added = await this.ctx.redis.zadd(this.ctx.keys.humanQueue(shard), 'NX', original.updatedAt, actionId);
    if (added === 0) return;
    report.compensations.requeued++;
    this.ctx.metrics.compensationsRequeued.inc();
    this.ctx.log.warn(
      { code: 'compensation_requeued', runId, actionId, compensation: comp.actionId },
      'an original left out of the human queue by an earlier release is queued again: the sweep finishes its compensation',
    );
  }
}
