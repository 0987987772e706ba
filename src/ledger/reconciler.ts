/**
 * The reconciler: sweeps actions left in `dispatched` or `outcome_unknown`
 * (after a crash) and resolves them with the service, like the step's own
 * recovery does. One sweeper at a time (redlock, an efficiency guard only:
 * every move is a compare-and-set, so two sweeps at once are still safe).
 * Actions with a live owner (the run's current step job holds its lock, or a
 * compensation's lease is held: Ledger.ownerAlive) are left to that owner.
 * It also finishes operators' compensations that did not finish (their
 * originals stay in the human queue until then: sweepCompensations), and
 * queues again those an earlier release left out of it (CompensationRequeue).
 * Every reconciler also runs a compactor (src/runs/compactor.ts), which shrinks the runs that ended; unlike the
 * sweep it is not elected: each claims its own runs.
 */
import Redlock from 'redlock';
import type { Logger } from 'pino';
import type { EngineContext } from '../runs/engineContext.js';
import type { WriteTool } from '../core/tool.js';
import { unreadableSpecField, type RunSpec } from '../runs/spec.js';
import { errorCode } from '../core/errors.js';
import { type ActionRecord, type Ledger, LedgerConflict, ledgerFor } from './ledger.js';
import { reconcile, replicateActions, type ReconcileDeps, type ReconcileOutcome } from './reconcile.js';
import { expireApprovals } from './approvals.js';
import { CompensationRefused, Compensations, deliveryRefused } from './compensation.js';
import { createEffectRunner } from './runner.js';
import { CompensationRequeue } from './compensationRequeue.js';
import { CrashPoints } from '../config/testHooks.js';
import { childRunsOf } from '../runs/children.js';
import { StuckRuns, type StuckRunsReport } from '../runs/stuckRuns.js';
import { Compactor } from '../runs/compactor.js';
import { PassLoop } from '../core/passLoop.js';

export interface SweepReport {
  examined: number;
  skippedLive: number;
  /** Run-index entries removed because the run's keys had expired (retention). */
  indexPruned: number;
  /** Open-action index entries removed because their ledger record was gone (expired with its run, erased). */
  actionIndexPruned: number;
  outcomes: Partial<Record<ReconcileOutcome, number>>;
  /** Runs whose current step job was failed, missing or completed without a commit (src/runs/stuckRuns.ts). */
  stuckRuns?: StuckRunsReport;
  /** Actions left open because settling them threw (`sweep_action_failed`): the next sweep takes them again. */
  failures: number;
  /**
   * Compensations the sweep drove (their original in compensation_required in the human queue, no live driver):
   * `ended` ended their run, `unsettled` are still not sent (compensation_unsettled), the next sweep drives them;
   * `atWork` were confirmed while their run was at work (compensated_run_at_work: not ended, the original left the
   * queue); `skippedLive` had a live driver. `requeued`: originals an earlier release left out of the human queue, put
   * back in it (CompensationRequeue) before the queue's sweep.
   */
  compensations: {
    driven: number;
    ended: number;
    unsettled: number;
    atWork: number;
    skippedLive: number;
    requeued: number;
  };
}

const count = (report: SweepReport, o: ReconcileOutcome) => (report.outcomes[o] = (report.outcomes[o] ?? 0) + 1);

/** Open actions read per page, and pages per shard per sweep (the next sweep resumes after the last). */
const OPEN_ACTION_PAGE = 100;
const OPEN_ACTION_PAGES = 10;
/** Human-queue pages (of OPEN_ACTION_PAGE entries) read per shard per sweep for compensations to finish. */
const HUMAN_QUEUE_PAGES = 10;

export class Reconciler {
  private readonly ledger: Ledger;
  /** Per shard, where the open-action walk resumes when the last sweep stopped at OPEN_ACTION_PAGES. */
  private readonly cursors = new Map<number, number>();
  private readonly redlock: Redlock;
  private readonly stuck: StuckRuns;
  private readonly compensations: Compensations;
  private readonly requeue: CompensationRequeue;
  readonly compactor: Compactor;
  private readonly loop: PassLoop;

  constructor(
    private readonly ctx: EngineContext,
    private readonly id = `reconciler:${process.pid}`,
  ) {
    this.ledger = ledgerFor(ctx);
    this.compensations = new Compensations(
      ctx,
      this.ledger,
      createEffectRunner(ctx, { workerId: this.id, crash: new CrashPoints([]) }),
    );
    this.requeue = new CompensationRequeue(ctx, this.ledger);
    this.stuck = new StuckRuns({ ...ctx, children: childRunsOf(ctx) });
    this.compactor = new Compactor(ctx);
    this.loop = new PassLoop({
      pass: () => this.sweepIfLeader(),
      intervalMs: () => ctx.cfg.RECONCILER_SWEEP_MS,
      onError: (err) => {
        ctx.metrics.reconcilerSweeps.inc({ outcome: 'failed' });
        ctx.log.warn({ code: 'sweep_failed', err }, 'sweep failed');
      },
    });
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
    const report: SweepReport = {
      examined: 0,
      skippedLive: 0,
      indexPruned: 0,
      actionIndexPruned: 0,
      outcomes: {},
      failures: 0,
      compensations: { driven: 0, ended: 0, unsettled: 0, atWork: 0, skippedLive: 0, requeued: 0 },
    };
    report.stuckRuns = await this.stuck.sweep(nowMs);
    this.requeue.begin(nowMs);
    for (const shard of this.ctx.keys.allShards()) {
      report.indexPruned += await this.pruneRunIndex(shard, nowMs);
      await this.sweepOpenActions(shard, nowMs - this.ctx.cfg.RECONCILER_MIN_AGE_MS, report);
      // Before the human queue's sweep, which then finishes what it puts back.
      await this.requeue.shard(shard, report, (actionId, check) => this.apart(actionId, report, check));
      // After the open actions: a compensation they just confirmed by lookup ends its run in the same sweep.
      await this.sweepCompensations(shard, nowMs - this.ctx.cfg.RECONCILER_MIN_AGE_MS, report);
    }
    return report;
  }

  /**
   * The shard's open actions older than `maxScore`, oldest first, a page at a time. An entry left in the index (a
   * live owner, no tool in this process, a failure) is paged past, so however many of them sit at the head they
   * never starve the entries behind them; an entry settled or removed leaves the index and is not counted in the
   * offset. At most OPEN_ACTION_PAGES pages per shard per sweep: the next sweep resumes where this one stopped.
   */
  private async sweepOpenActions(shard: number, maxScore: number, report: SweepReport): Promise<void> {
    const next = await this.ledger.walkDue(
      this.ctx.keys.openActions(shard),
      maxScore,
      (actionId) => this.apart(actionId, report, () => this.sweepAction(shard, actionId, report)),
      { from: this.cursors.get(shard) ?? 0, pages: OPEN_ACTION_PAGES, pageSize: OPEN_ACTION_PAGE },
    );
    if (next === undefined) this.cursors.delete(shard);
    else this.cursors.set(shard, next);
  }

  /**
   * One action that cannot be settled (a spec that no longer parses, a tool that throws) is named, counted and left
   * for the next sweep: it never stops the sweep of every other action, and of the approvals.
   */
  private async apart(actionId: string, report: SweepReport, settle: () => Promise<void>): Promise<void> {
    try {
      await settle();
    } catch (err) {
      report.failures++;
      this.actionFailed(actionId, errorCode(err), 'left_open');
    }
  }

  /** Settles one open action of the shard index with its service, if its owner is gone. */
  private async sweepAction(shard: number, actionId: string, report: SweepReport): Promise<void> {
    const rec = await this.ledger.getInShard(shard, actionId);
    if (!rec) {
      // The record expired with its run (or was erased) while indexed: nothing is left to settle, and an entry kept
      // would be read again by every sweep.
      await this.ctx.redis.zrem(this.ctx.keys.openActions(shard), actionId);
      report.actionIndexPruned++;
      return;
    }
    if (rec.state !== 'dispatched' && rec.state !== 'outcome_unknown') return;
    report.examined++;
    if (await this.ledger.ownerAlive(rec)) {
      report.skippedLive++;
      return;
    }
    const spec = await this.readSpec(rec);
    if (spec === 'invalid') {
      await this.toPerson(rec, report);
      return;
    }
    const tool = spec ? this.ctx.agents.get(spec.agent)?.tools.get(rec.tool) : undefined;
    if (!spec || !tool || tool.effect !== 'write') {
      // Left open (and counted by the open-actions gauge): a process that runs this agent sweeps it.
      this.ctx.log.warn(
        { code: 'sweep_skipped_no_tool', runId: rec.runId, actionId, agent: spec?.agent, tool: rec.tool },
        'no write tool here for this action',
      );
      return;
    }
    if (!(await this.takeOver(rec))) return;
    const toolCtx = { runId: rec.runId, step: rec.step, signal: new AbortController().signal, input: spec.input };
    // A step's action (driven for the model) is not settled by a same-key replay once its run's cancel is recorded,
    // as in the step's own recovery; an operator's compensation (`compensates`) is not stopped by a cancel.
    const outcome = await reconcile(
      this.reconcileDeps(this.ctx.log.child({ runId: rec.runId, actionId, tool: rec.tool }), !rec.compensates),
      { ...rec, state: 'outcome_unknown' },
      tool as WriteTool,
      toolCtx,
      this.id,
    );
    count(report, outcome);
    this.ctx.log.info({ code: `swept_${outcome}`, runId: rec.runId, actionId }, 'action reconciled by the sweeper');
  }

  /**
   * The shard's human queue, for originals in compensation_required (ledgerTransition-6.lua keeps them there until
   * their compensation has ended the run): each one whose compensation has no live driver is driven like a repeated
   * operator request (Compensations.drive): one left planned, authorized or safe_retry is sent with its key, one
   * dispatched is looked up, one confirmed ends the run and leaves the queue (a run at work is not waited for nor
   * ended: Compensations.drive). One with a person (needs_human) or refused by its service stays for the person. Paged like the open actions, HUMAN_QUEUE_PAGES pages per sweep.
   */
  private async sweepCompensations(shard: number, maxScore: number, report: SweepReport): Promise<void> {
    await this.ledger.walkDue(
      this.ctx.keys.humanQueue(shard),
      maxScore,
      (actionId) => this.apart(actionId, report, () => this.sweepCompensation(shard, actionId, report)),
      { pages: HUMAN_QUEUE_PAGES, pageSize: OPEN_ACTION_PAGE },
    );
  }

  private async sweepCompensation(shard: number, actionId: string, report: SweepReport): Promise<void> {
    const original = await this.ledger.getInShard(shard, actionId);
    if (original?.state !== 'compensation_required' || !original.compensatedBy) return;
    const comp = await this.ledger.get(original.runId, original.compensatedBy);
    if (!comp) throw new CompensationRefused(`compensation ${original.compensatedBy} of ${actionId} is missing`);
    // With a person (its own item in this queue), never sent and never to be, or refused by its service: a person's
    // (who compensates otherwise, or closes it with the finding accept).
    if (comp.state === 'needs_human' || deliveryRefused(comp)) return;
    // A live driver (an operator's request holding the lease) finishes it; counted apart from the open actions, of
    // which a dispatched compensation is also one.
    if (comp.state !== 'confirmed' && (await this.ledger.ownerAlive(comp))) {
      report.compensations.skippedLive++;
      return;
    }
    const spec = await this.readSpec(comp);
    if (spec === 'invalid' || !spec) throw new CompensationRefused(`run ${comp.runId} has no readable spec`);
    report.compensations.driven++;
    const result = await this.compensations.drive(comp, spec, this.id, 'sweep');
    if (result.run.ended) report.compensations.ended++;
    if (result.runAtWork) report.compensations.atWork++;
    if (result.unsettled) report.compensations.unsettled++;
    this.ctx.log.info(
      {
        code: 'swept_compensation',
        runId: comp.runId,
        actionId: comp.actionId,
        state: result.compensation.state,
        ended: result.run.ended,
      },
      'compensation driven by the sweeper',
    );
  }

  /** @param unlessCancelled no same-key replay once the run's cancel is recorded (an action driven for the model). */
  private reconcileDeps(log: Logger, unlessCancelled: boolean): ReconcileDeps {
    return {
      unlessCancelled,
      ledger: this.ledger,
      metrics: this.ctx.metrics,
      log,
      deadlineMs: this.ctx.cfg.RECONCILE_DEADLINE_MS,
      pollMs: this.ctx.cfg.RECONCILE_POLL_MS,
      minAttemptMs: this.ctx.cfg.RECONCILE_MIN_ATTEMPT_MS,
      ...(this.ctx.cfg.REDIS_MIN_REPLICAS > 0 ? { replicate: replicateActions(this.ctx) } : {}),
    };
  }

  /** The action's run spec; 'invalid' when it is stored but no longer parses (no retry can make it parse). */
  private async readSpec(rec: ActionRecord): Promise<RunSpec | undefined | 'invalid'> {
    try {
      return await this.ctx.store.readSpec(rec.runId);
    } catch (err) {
      if (unreadableSpecField(err) !== undefined) return 'invalid';
      throw err;
    }
  }

  /** A `dispatched` action with no live owner becomes `outcome_unknown`; false when someone else moved it first. */
  private async takeOver(rec: ActionRecord): Promise<boolean> {
    if (rec.state !== 'dispatched') return true;
    try {
      await this.ledger.transition(rec.runId, rec.actionId, 'dispatched', 'outcome_unknown', {
        by: this.id,
        why: 'swept: dispatched with no live owner',
      });
      return true;
    } catch (err) {
      if (err instanceof LedgerConflict) return false;
      throw err;
    }
  }

  /**
   * An open action whose run spec no longer parses cannot be settled here (no tool, no input for its lookup):
   * it goes to a person through outcome_unknown (the only way the ledger's moves allow), with `invalid_spec` as
   * the reason, instead of failing every sweep.
   */
  private async toPerson(rec: ActionRecord, report: SweepReport): Promise<void> {
    if (!(await this.takeOver(rec))) return;
    try {
      await this.ledger.transition(rec.runId, rec.actionId, 'outcome_unknown', 'needs_human', {
        by: this.id,
        why: "invalid_spec: the run's stored spec no longer parses, the sweep cannot ask the service",
        evidence: { reason: 'invalid_spec' },
      });
    } catch (err) {
      if (err instanceof LedgerConflict) return;
      throw err;
    }
    this.ctx.metrics.effects.inc({ tool: rec.tool, state: 'needs_human' });
    count(report, 'needs_human');
    this.actionFailed(rec.actionId, 'invalid_spec', 'needs_human');
  }

  /** Named (ids and codes, never the error's text: it can carry customer data) and counted. */
  private actionFailed(actionId: string, code: string, outcome: 'needs_human' | 'left_open'): void {
    this.ctx.metrics.sweepActionFailures.inc({ code, outcome });
    this.ctx.log.error(
      { code: 'sweep_action_failed', actionId, error: code, outcome },
      'the sweep could not settle an action',
    );
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

  /** Whether its sweeps run (started, not stopped). */
  get ready(): boolean {
    return this.loop.running;
  }

  /** Sweeps every RECONCILER_SWEEP_MS while it holds the election lock; its compactor packs ended runs. */
  start(): void {
    this.compactor.start();
    this.loop.start();
  }

  /** One tick: a sweep when this reconciler holds (or takes) the election lock. */
  private async sweepIfLeader(): Promise<void> {
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
      // Each in its own try: a sweep that fails still lets approvals expire, and the other way round.
      let failed = false;
      try {
        const report = await this.sweep();
        // A shard the stuck-run sweep could not walk (logged stuck_runs_sweep_failed) leaves its runs unchecked.
        if ((report.stuckRuns?.failedShards ?? 0) > 0) failed = true;
      } catch (err) {
        failed = true;
        this.ctx.log.warn({ code: 'sweep_failed', err }, 'sweep failed');
      }
      try {
        await expireApprovals(this.ctx, Date.now());
      } catch (err) {
        failed = true;
        this.ctx.log.warn({ code: 'approval_expiry_failed', err }, 'expiring approvals failed');
      }
      this.ctx.metrics.reconcilerSweeps.inc({ outcome: failed ? 'failed' : 'done' });
    } finally {
      await lock.unlock().catch(() => {});
    }
  }

  async stop(): Promise<void> {
    await Promise.all([this.loop.stop(), this.compactor.stop()]);
  }
}
