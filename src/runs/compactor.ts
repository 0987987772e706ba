/**
 * The compactor: shrinks every ended run (src/runs/compact.ts) off the step's path, in the reconciler process.
 *
 * The script that ends a run puts it on its shard's compaction queue in the same atomic change
 * (includes/runIndex.lua), so a run is compacted whatever happens to the process that ended it. Each pass claims the
 * oldest due entries of every shard (compactClaim-1.lua gives them a lease: two reconcilers do not pack the same run
 * twice, and a compactor killed holding a claim leaves its runs to the next pass after COMPACT_LEASE_MS), compacts a
 * few at a time and dequeues those done in one request, each fenced on its claim (compactDone-1.lua: a run that ended
 * again meanwhile stays queued for that end). A run that changed while it was read stays claimed and is taken again when its lease lapses.
 *
 * Compacting is housekeeping: the work of a step is not waiting on it, and a run nobody compacted yet is only larger
 * (every reader expands the packed forms and reads the listed ones alike).
 */
import type { EngineContext } from './engineContext.js';
import { compactEndedRun, type Compacted } from './compact.js';
import { compactClaimCall, type CompactClaim } from '../store/calls/compactClaim.js';
import { compactDoneCalls } from '../store/calls/compactDone.js';
import { PassLoop } from '../core/passLoop.js';

export type CompactorContext = Pick<EngineContext, 'redis' | 'keys' | 'cfg' | 'log' | 'metrics'>;

export interface CompactPassReport {
  claimed: number;
  packed: number;
  /** Dequeued with nothing packed: nothing left to pack, or the run is at work again or gone. */
  dequeued: number;
  /** Left claimed, taken again after the lease: changed while read, or failed. */
  retained: number;
  /** Seconds the oldest run due had waited when the pass began (since its end, or its claim's lapse; 0: none). */
  lagSeconds: number;
}

/** Runs compacted at once: their reads and writes overlap, and one run's round trips do not idle the pass. */
const IN_FLIGHT = 8;

export class Compactor {
  private readonly loop: PassLoop;

  constructor(private readonly ctx: CompactorContext) {
    this.loop = new PassLoop({
      pass: () => this.pass(),
      intervalMs: () => ctx.cfg.COMPACT_INTERVAL_MS,
      onError: (err) => {
        ctx.metrics.compactions.inc({ outcome: 'failed' });
        ctx.log.warn({ code: 'compact_pass_failed', err }, 'compaction pass failed');
      },
    });
  }

  /** Whether its passes run (started, not stopped). */
  get ready(): boolean {
    return this.loop.running;
  }

  /** One pass over every shard's queue (safe in several processes at once: each claims its own runs). */
  async pass(nowMs = Date.now()): Promise<CompactPassReport> {
    const report: CompactPassReport = { claimed: 0, packed: 0, dequeued: 0, retained: 0, lagSeconds: 0 };
    const { COMPACT_BATCH: batch, COMPACT_LEASE_MS: lease } = this.ctx.cfg;
    // The oldest waiting run: the lowest score of each shard's queue as its first claim found it (a claim's lies ahead).
    let oldest = nowMs;
    for (const shard of this.ctx.keys.allShards()) {
      const queue = this.ctx.keys.compactQueue(shard);
      for (let full = true, first = true; full; first = false) {
        const { claims, lowest } = await compactClaimCall(this.ctx.redis, queue, nowMs, lease, batch);
        full = claims.length === batch;
        if (first && lowest !== undefined) oldest = Math.min(oldest, lowest);
        report.claimed += claims.length;
        for (let i = 0; i < claims.length; i += IN_FLIGHT)
          await this.compactBatch(claims.slice(i, i + IN_FLIGHT), queue, report);
      }
    }
    report.lagSeconds = Math.max(0, (nowMs - oldest) / 1000);
    return report;
  }

  /** Passes until no shard has a run due (tests and benchmarks: every ended run compacted). */
  async drain(): Promise<void> {
    for (let r = await this.pass(); r.claimed > 0; r = await this.pass());
  }

  /** Compacts a few claimed runs at once, then takes those done off the queue in one request. */
  private async compactBatch(claims: CompactClaim[], queue: string, report: CompactPassReport): Promise<void> {
    const outcomes = await Promise.all(claims.map((c) => this.compactOne(c)));
    // A run that changed while read, or failed, keeps its claim: it is read again once the lease lapses.
    const done = claims.filter((_, i) => outcomes[i] !== 'changed' && outcomes[i] !== 'failed');
    try {
      await compactDoneCalls(this.ctx.redis, queue, done);
    } catch (err) {
      // Packed, or found with nothing to pack, but still claimed: taken again after the lease, nothing left to pack.
      for (let i = 0; i < claims.length; i++) if (done.includes(claims[i]!)) outcomes[i] = 'failed';
      this.ctx.log.warn({ code: 'compact_failed', runs: done.length, err }, 'compacted runs not dequeued; taken again');
    }
    for (const outcome of outcomes) {
      this.ctx.metrics.compactions.inc({ outcome });
      if (outcome === 'packed') report.packed++;
      else if (outcome === 'changed' || outcome === 'failed') report.retained++;
      else report.dequeued++;
    }
  }

  private async compactOne(claim: CompactClaim): Promise<Compacted['outcome'] | 'failed'> {
    try {
      return (await compactEndedRun(this.ctx.redis, this.ctx.keys, claim.runId)).outcome;
    } catch (err) {
      this.ctx.log.warn({ code: 'compact_failed', runId: claim.runId, err }, 'ended run not compacted; taken again');
      return 'failed';
    }
  }

  /** Passes every COMPACT_INTERVAL_MS until stop(). */
  start(): void {
    this.loop.start();
  }

  /** No pass after it; the one in flight ends first. */
  stop(): Promise<void> {
    return this.loop.stop();
  }
}
