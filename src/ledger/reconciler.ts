/**
 * The reconciler: sweeps actions left in `dispatched` or `outcome_unknown`
 * (after a crash) and resolves them with the service, like the step's own
 * recovery does. One sweeper at a time (redlock, an efficiency guard only:
 * every move is a compare-and-set, so two sweeps at once are still safe).
 * Actions with a live owner (the run's current step job holds its lock, or a
 * compensation's lease is held: Ledger.ownerAlive) are left to that owner.
 */
import Redlock from 'redlock';
import type { EngineContext } from '../runs/engineContext.js';
import type { WriteTool } from '../core/tool.js';
import { type Ledger, LedgerConflict, ledgerFor } from './ledger.js';
import { reconcile, replicateActions, type ReconcileOutcome } from './reconcile.js';
import { expireApprovals } from './approvals.js';
import { childRunsOf } from '../runs/children.js';
import { StuckRuns, type StuckRunsReport } from '../runs/stuckRuns.js';

export interface SweepReport {
  examined: number;
  skippedLive: number;
  /** Run-index entries removed because the run's keys had expired (retention). */
  indexPruned: number;
  outcomes: Partial<Record<ReconcileOutcome, number>>;
  /** Runs whose current step job was failed, missing or completed without a commit (src/runs/stuckRuns.ts). */
  stuckRuns?: StuckRunsReport;
}

export class Reconciler {
  private readonly ledger: Ledger;
  private readonly redlock: Redlock;
  private readonly stuck: StuckRuns;
  private timer?: NodeJS.Timeout;
  private running?: Promise<unknown>;
  ready = false;

  constructor(
    private readonly ctx: EngineContext,
    private readonly id = `reconciler:${process.pid}`,
  ) {
    this.ledger = ledgerFor(ctx);
    this.stuck = new StuckRuns({ ...ctx, children: childRunsOf(ctx) });
    this.redlock = new Redlock([ctx.redis], { retryCount: 0 });
    // Redlock ends a lock call that met a store error (OOM under noeviction, READONLY after a failover) with the
    // same LockError as one that found the lock held: its client errors are what tell the two apart (start).
    this.redlock.on('clientError', (err: unknown) => {
      this.lockClientError = err;
    });
  }

  private lockClientError: unknown;

  /** One sweep over every shard (safe to run twice, concurrently or not). */
  async sweep(nowMs = Date.now()): Promise<SweepReport> {
    const report: SweepReport = { examined: 0, skippedLive: 0, indexPruned: 0, outcomes: {} };
    const count = (o: ReconcileOutcome) => (report.outcomes[o] = (report.outcomes[o] ?? 0) + 1);
    report.stuckRuns = await this.stuck.sweep(nowMs);
    for (const shard of this.ctx.keys.allShards()) {
      report.indexPruned += await this.pruneRunIndex(shard, nowMs);
      const due = await this.ledger.indexed(
        this.ctx.keys.openActions(shard),
        nowMs - this.ctx.cfg.RECONCILER_MIN_AGE_MS,
      );
      for (const { actionId } of due) {
        const rec = await this.ledger.getInShard(shard, actionId);
        if (!rec || (rec.state !== 'dispatched' && rec.state !== 'outcome_unknown')) continue;
        report.examined++;
        if (await this.ledger.ownerAlive(rec)) {
          report.skippedLive++;
          continue;
        }
        const spec = await this.ctx.store.readSpec(rec.runId);
        const tool = spec ? this.ctx.agents.get(spec.agent)?.tools.get(rec.tool) : undefined;
        if (!spec || !tool || tool.effect !== 'write') {
          // Left open (and counted by the open-actions gauge): a process that runs this agent sweeps it.
          this.ctx.log.warn(
            { code: 'sweep_skipped_no_tool', runId: rec.runId, actionId, agent: spec?.agent, tool: rec.tool },
            'no write tool here for this action',
          );
          continue;
        }
        if (rec.state === 'dispatched') {
          try {
            await this.ledger.transition(rec.runId, actionId, 'dispatched', 'outcome_unknown', {
              by: this.id,
              why: 'swept: dispatched with no live owner',
            });
          } catch (err) {
            if (err instanceof LedgerConflict) continue;
            throw err;
          }
        }
        const toolCtx = { runId: rec.runId, step: rec.step, signal: new AbortController().signal, input: spec.input };
        const outcome = await reconcile(
          {
            ledger: this.ledger,
            metrics: this.ctx.metrics,
            deadlineMs: this.ctx.cfg.RECONCILE_DEADLINE_MS,
            pollMs: this.ctx.cfg.RECONCILE_POLL_MS,
            minAttemptMs: this.ctx.cfg.RECONCILE_MIN_ATTEMPT_MS,
            ...(this.ctx.cfg.REDIS_MIN_REPLICAS > 0 ? { replicate: replicateActions(this.ctx) } : {}),
          },
          { ...rec, state: 'outcome_unknown' },
          tool as WriteTool,
          toolCtx,
          this.id,
        );
        count(outcome);
        this.ctx.log.info({ code: `swept_${outcome}`, runId: rec.runId, actionId }, 'action reconciled by the sweeper');
      }
    }
    return report;
  }

  /**
   * The per-shard run index (zset by creation time) outlives the runs it lists:
   * a finished run's keys expire after RUN_RETENTION_MS, its index entry does
   * not. Entries older than the retention whose run hash is gone are removed;
   * a run still alive (parked for weeks, say) keeps its entry.
   */
  private async pruneRunIndex(shard: number, nowMs: number, batch = 500, maxPerSweep = 5000): Promise<number> {
    const index = this.ctx.keys.runIndex(shard);
    const olderThan = nowMs - this.ctx.cfg.RUN_RETENTION_MS;
    let pruned = 0;
    for (let offset = 0; offset < maxPerSweep; offset += batch) {
      const ids = await this.ctx.redis.zrangebyscore(index, '-inf', olderThan, 'LIMIT', offset, batch);
      if (ids.length === 0) break;
      const pipe = this.ctx.redis.pipeline();
      for (const id of ids) pipe.exists(this.ctx.keys.run(id).run);
      const exists = ((await pipe.exec()) ?? []).map((r) => Number(r[1]));
      const gone = ids.filter((_, i) => exists[i] === 0);
      if (gone.length > 0) await this.ctx.redis.zrem(index, ...gone);
      pruned += gone.length;
      offset -= gone.length; // the next batch starts after the live entries kept
      if (ids.length < batch) break;
    }
    return pruned;
  }

  /** Sweeps every RECONCILER_SWEEP_MS while it holds the election lock. */
  start(): void {
    this.ready = true;
    const tick = async () => {
      const ttl = this.ctx.cfg.RECONCILER_SWEEP_MS * 3 + this.ctx.cfg.RECONCILE_DEADLINE_MS;
      let lock;
      this.lockClientError = undefined;
      try {
        lock = await this.redlock.lock(this.ctx.keys.reconcilerLeader(), ttl);
      } catch {
        // Held by another reconciler, which sweeps; a store error means nobody may be sweeping: named and counted.
        if (this.lockClientError !== undefined) {
          this.ctx.metrics.reconcilerSweeps.inc({ outcome: 'lock_failed' });
          this.ctx.log.warn(
            { code: 'reconciler_lock_failed', err: this.lockClientError },
            'the election lock could not be asked for: no sweep this tick',
          );
        }
        return;
      }
      try {
        await this.sweep();
        await expireApprovals(this.ctx, Date.now());
        this.ctx.metrics.reconcilerSweeps.inc({ outcome: 'done' });
      } catch (err) {
        this.ctx.metrics.reconcilerSweeps.inc({ outcome: 'failed' });
        this.ctx.log.warn({ code: 'sweep_failed', err }, 'sweep failed');
      } finally {
        await lock.unlock().catch(() => {});
      }
    };
    const loop = () => {
      this.running = tick().finally(() => {
        if (this.ready) this.timer = setTimeout(loop, this.ctx.cfg.RECONCILER_SWEEP_MS);
      });
    };
    loop();
  }

  async stop(): Promise<void> {
    this.ready = false;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }
}
