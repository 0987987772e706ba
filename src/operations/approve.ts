/**
 * An operator's decision on a pending approval, bound to the content they were shown (its fingerprint). The ledger
 * records the decision and the operator's name in one atomic move; the run's journal gets an `operator` entry; every
 * caller resumes the run (if the first decider died before resuming, the second or the sweep finishes the job).
 */
import type { EngineContext } from '../runs/engineContext.js';
import { APPROVAL_VOID, settleUnresumed, type VoidedDecision } from '../ledger/approvals.js';
import { LedgerConflict, type ApprovalDecision, type Ledger } from '../ledger/ledger.js';
import { resumeParked } from '../runs/resume.js';
import { stopRun } from '../runs/stop.js';
import { visibleAction, type Actor } from './actor.js';
import { done, NO_ACTION, refused, type Outcome } from './outcome.js';

/** Approve or reject; a second decision reports the first (`alreadyDecided`). */
export async function decideApproval(
  ctx: EngineContext,
  ledger: Ledger,
  actor: Actor,
  actionId: string,
  decision: 'approve' | 'reject',
  fingerprint: string,
): Promise<Outcome<ApprovalDecision & { alreadyDecided: boolean }>> {
  const rec = await visibleAction(ctx, ledger, actor, actionId);
  if (!rec) return NO_ACTION;
  let result: Awaited<ReturnType<Ledger['decideApproval']>>;
  try {
    result = await ledger.decideApproval(
      rec.runId,
      actionId,
      decision,
      fingerprint,
      actor.name,
      decision === 'approve' ? 'approved by an operator' : 'rejected by an operator',
    );
  } catch (err) {
    if (err instanceof LedgerConflict) return refused('not_pending', { actionId, state: err.actual });
    throw err;
  }
  if (result.outcome === 'fingerprint_mismatch') return refused('fingerprint_mismatch', { actionId });
  // The run finished while it waited (cancelled, say): the approval authorises nothing.
  if (result.outcome === 'void' || result.decision.approver === APPROVAL_VOID)
    return refused('run_finished', { ...result.decision });
  if (result.outcome === 'expired' || result.decision.reason === 'approval_expired') {
    await stopRun(ctx, rec.runId, {
      expected: ['waiting_approval'],
      status: 'failed',
      reason: 'approval_expired',
      now: Date.now(),
    });
    await ctx.redis.zrem(ctx.keys.approvals(ctx.keys.shardOf(rec.runId)), actionId);
    return refused('approval_expired', { ...result.decision });
  }
  if (result.outcome === 'decided') {
    await ctx.store.recordOperatorAction(rec.runId, {
      action: decision,
      by: actor.name,
      at: result.decision.decidedAt,
      actionId,
      detail: result.decision.state,
    });
  }
  const resumed = await resumeParked(ctx, rec.runId, 'waiting_approval');
  // The run ended (a cancel between the decision and the resume), a later run superseded it, its parent took its
  // outcome and moved on, or its stored spec no longer parses: void.
  const voided = await settleUnresumed(ctx, rec.runId, actionId, resumed);
  await ctx.redis.zrem(ctx.keys.approvals(ctx.keys.shardOf(rec.runId)), actionId);
  if (voided) return voidRefusal(result.decision, voided);
  return done({ ...result.decision, alreadyDecided: result.outcome === 'already_decided' });
}

/** A decision made void: the run's status, the action's final state, and why. */
function voidRefusal<T extends object>(decision: object, v: VoidedDecision): Outcome<T> {
  const refusal = v.laterRunId
    ? 'run_superseded'
    : v.parentRunId
      ? 'parent_moved_on'
      : v.invalidSpec
        ? 'invalid_spec'
        : 'run_finished';
  return refused(refusal, {
    ...decision,
    state: v.state,
    runStatus: v.runStatus,
    ...(v.cancelReason ? { cancelReason: v.cancelReason } : {}),
    ...(v.laterRunId ? { laterRunId: v.laterRunId } : {}),
    ...(v.parentRunId ? { parentRunId: v.parentRunId } : {}),
    ...(v.invalidSpec ? { field: v.invalidSpec } : {}),
    message: v.laterRunId
      ? `a later run of the subject (${v.laterRunId}) superseded the run: the decision is void`
      : v.parentRunId
        ? `the run's parent (${v.parentRunId}) took its outcome and moved on: the decision is void, nothing will be sent`
        : v.invalidSpec
          ? `the run's stored spec no longer parses (${v.invalidSpec}): the decision is void, nothing will be sent, ` +
            'the run ends failed'
          : `the run is ${v.runStatus}: the decision is void, nothing will be sent`,
  });
}
