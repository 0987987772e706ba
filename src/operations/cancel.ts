/**
 * Cancel: a parked run at once, a running one at its next commit (its step meets the recorded cancel; the ledger's
 * move to `dispatched` refuses atomically once it is recorded). The reason names the actor:
 * `cancelled_by_operator: requested by <name>`. The run's child runs (agent tools) are cancelled with it, and theirs,
 * each `parent_cancelled: <parent>`; a child the cascade misses (this process dies) ends at its next step, finding its
 * parent ended.
 */
import type { EngineContext } from '../runs/engineContext.js';
import { FenceError } from '../core/errors.js';
import { isTerminal, type RunStatus } from '../core/status.js';
import { withdrawApprovals } from '../ledger/approvals.js';
import type { LedgerState } from '../ledger/states.js';
import { stopRun, wakeForCancel } from '../runs/stop.js';
import { childRunsOf } from '../runs/children.js';
import { isWaitStatus, releaseWaitForCancel, WAIT_STATUSES } from '../runs/waits.js';
import { isRunId, stepJobId } from '../store/keys.js';
import { readRun } from '../store/runRecord.js';
import { actorSeesRun, type Actor } from './actor.js';
import { accepted, done, NO_RUN, refused, type Outcome } from './outcome.js';

export interface Cancelled {
  runId: string;
  status: RunStatus;
  /** `now`: the run was parked and is cancelled; `at_next_commit`: its step in flight meets the cancel. */
  cancelled: 'now' | 'at_next_commit';
  operator: string;
  /**
   * The run's actions still in the human queue (an effect's outcome a person must find, a compensation pending):
   * the cancel settles none of them. They stay in GET /v1/reconciliations, and the run's keys are kept (no
   * retention) until a person settles them (includes/expireRun.lua). Absent when none waits.
   */
  waitingForPerson?: { actionId: string; state: LedgerState }[];
}

export async function cancelRun(ctx: EngineContext, actor: Actor, runId: string): Promise<Outcome<Cancelled>> {
  if (!isRunId(runId) || !(await actorSeesRun(ctx, actor, runId))) return NO_RUN;
  const result = await cancelOne(ctx, runId, `cancelled_by_operator: requested by ${actor.name}`, actor.name);
  if (!result) return NO_RUN;
  if (!result.stopped && isTerminal(result.status)) return refused('run_finished', { runId, status: result.status });
  await cancelChildren(ctx, runId, actor.name);
  const waiting = await waitingForPerson(ctx, runId);
  const value: Cancelled = {
    runId,
    status: result.status,
    cancelled: result.stopped ? 'now' : 'at_next_commit',
    operator: actor.name,
    ...(waiting.length > 0 ? { waitingForPerson: waiting } : {}),
  };
  return result.stopped ? done(value) : accepted(value);
}

/** The run's actions in its shard's human queue, with their states. */
async function waitingForPerson(
  ctx: EngineContext,
  runId: string,
): Promise<{ actionId: string; state: LedgerState }[]> {
  const human = ctx.keys.humanQueue(ctx.keys.shardOf(runId));
  const out: { actionId: string; state: LedgerState }[] = [];
  for (const key of (await ctx.redis.smembers(ctx.keys.run(runId).actions)).sort()) {
    const [actionId, state] = await ctx.redis.hmget(key, 'actionId', 'state');
    if (actionId && state && (await ctx.redis.zscore(human, actionId)) !== null)
      out.push({ actionId, state: state as LedgerState });
  }
  return out;
}

/** Every child run of `runId`, and theirs, cancelled (one that ended already is left as it is). */
async function cancelChildren(ctx: EngineContext, runId: string, by: string): Promise<void> {
  for (const child of await childRunsOf(ctx).childrenOf(runId)) {
    if (await cancelOne(ctx, child, `parent_cancelled: ${runId}`, by)) await cancelChildren(ctx, child, by);
  }
}

/** One run's cancel: its status afterwards, and whether it was ended now; undefined when the run is gone. */
async function cancelOne(
  ctx: EngineContext,
  runId: string,
  reason: string,
  by: string,
): Promise<{ stopped: boolean; status: RunStatus } | undefined> {
  // A run still waiting in its tenant's line (flow control) never started: taken out of the line, it is cancelled at
  // once.
  const neverStarted = (await ctx.admission?.withdraw(runId)) === true;
  // A run parked on a wait has a delayed wake job: taken out of the queue once the run is cancelled.
  const before = await readRun(ctx.redis, ctx.keys, runId, ['jobId']);
  // A run parked on an event wait lets its key go first: a delivery after the cancel starts a follow-up.
  await releaseWaitForCancel(ctx, runId);
  let result: { stopped: boolean; status: RunStatus };
  try {
    result = await stopRun(ctx, runId, {
      expected: ['waiting_approval', 'needs_human', ...WAIT_STATUSES, ...(neverStarted ? (['queued'] as const) : [])],
      status: 'cancelled',
      reason,
      now: Date.now(),
      requestCancel: true,
    });
  } catch (err) {
    if (err instanceof FenceError && err.code === 'run_missing') return undefined;
    throw err;
  }
  // At work but waiting (an outage, a follow-up, a rate limit): its step meets the cancel now.
  if (!result.stopped && !isTerminal(result.status)) await wakeForCancel(ctx, runId);
  if (result.stopped) await afterParkedCancel(ctx, runId, reason, by, { neverStarted, before });
  return result;
}

/**
 * A parked run was cancelled (no step in flight): the journal gets the operator's entry now (a running run's cancel
 * is journalled by its next commit, as a status entry whose reason names the operator), and what waited on the park
 * is let go.
 */
async function afterParkedCancel(
  ctx: EngineContext,
  runId: string,
  reason: string,
  by: string,
  was: { neverStarted: boolean; before: { status: RunStatus; jobId: string } | undefined },
): Promise<void> {
  await ctx.store.recordOperatorAction(runId, { action: 'cancel', by, at: Date.now(), detail: 'cancelled' });
  // Cancelled while waiting for approval: nobody is asked to decide for it any more.
  await withdrawApprovals(ctx, runId, reason);
  // Its step 1 job waited in the delayed set for an admission that will not come.
  if (was.neverStarted) await ctx.queues.forRun(runId).remove(stepJobId(runId, 1));
  // If this fails, the wake job finds the run cancelled when it fires and does nothing.
  if (was.before && isWaitStatus(was.before.status) && was.before.jobId)
    await ctx.queues
      .forRun(runId)
      .remove(was.before.jobId)
      .catch(() => 0);
  // A child cancelled on its own: its parent resumes now, with the cancel as the call's tool error. The cancel has
  // taken effect by here, and asking it again would not come this way: a failed wake is named, and the stuck-run
  // sweep promotes the parent's wake job (src/runs/stuckRuns.ts).
  const parent = (await ctx.store.readSpec(runId).catch(() => undefined))?.parent;
  if (parent)
    await childRunsOf(ctx)
      .wakeParent(parent.runId, runId)
      .catch((err: unknown) =>
        ctx.log.warn({ code: 'child_wake_failed', runId, err }, "parent's wake job not promoted (the sweep will)"),
      );
}
