/**
 * What an operator can do to a run, shared by the JSON API (approvals.ts,
 * reconciliations.ts, cancel.ts) and the console's forms (src/http/console):
 * decide an approval, resolve a human-queue item, cancel a run.
 *
 * Each takes the authenticated operator (src/http/operatorIdentity.ts) and records
 * its name, never a name typed in the request: in the ledger history (inside
 * the atomic move itself) and in the run's journal (an `operator` entry, right
 * after the move, before the run resumes). Each answers an HTTP status and a
 * JSON body; a tenant-scoped operator gets the same 404 for another tenant's
 * run or action as for an unknown one.
 */
import type { EngineContext } from '../../runs/engineContext.js';
import { FenceError } from '../../core/errors.js';
import { APPROVAL_VOID, settleUnresumed, withdrawApprovals, type VoidedDecision } from '../../ledger/approvals.js';
import { Compensations, CompensationRefused } from '../../ledger/compensation.js';
import { Ledger, LedgerConflict, type ActionRecord } from '../../ledger/ledger.js';
import { holdSlot, resumeParked } from '../../runs/resume.js';
import { retryRun, type RetryExtension } from '../../runs/retryRun.js';
import { stopRun, wakeForCancel } from '../../runs/stop.js';
import { releaseWaitForCancel } from '../../runs/waits.js';
import { childRunsOf } from '../../runs/children.js';
import { isWaitStatus, WAIT_STATUSES } from '../../runs/waits.js';
import { isActionId, isRunId, stepJobId } from '../../store/keys.js';
import { operatorSeesRun } from '../auth.js';
import type { Operator } from '../operatorIdentity.js';

export interface ActionAnswer {
  status: number;
  body: Record<string, unknown>;
}

const TERMINAL = new Set(['completed', 'failed', 'budget_exceeded', 'cancelled']);
const NO_ACTION: ActionAnswer = { status: 404, body: { error: 'not_found', message: 'no such action' } };
const NO_RUN: ActionAnswer = { status: 404, body: { error: 'not_found', message: 'no such run' } };

/** The action's record when it exists and the operator may see its run; else undefined (404 alike). */
export async function visibleAction(
  ctx: EngineContext,
  ledger: Ledger,
  op: Operator,
  actionId: string,
): Promise<ActionRecord | undefined> {
  if (!isActionId(actionId)) return undefined;
  const rec = await ledger.locate(actionId);
  if (!rec || !(await operatorSeesRun(ctx, op, rec.runId))) return undefined;
  return rec;
}

/**
 * Approve or reject a pending approval bound to `fingerprint` (the content the
 * operator was shown). A second decision reports the first (alreadyDecided).
 */
export async function decideApproval(
  ctx: EngineContext,
  ledger: Ledger,
  op: Operator,
  actionId: string,
  decision: 'approve' | 'reject',
  fingerprint: string,
): Promise<ActionAnswer> {
  const rec = await visibleAction(ctx, ledger, op, actionId);
  if (!rec) return NO_ACTION;
  let result;
  try {
    result = await ledger.decideApproval(
      rec.runId,
      actionId,
      decision,
      fingerprint,
      op.name,
      decision === 'approve' ? 'approved by an operator' : 'rejected by an operator',
    );
  } catch (err) {
    if (err instanceof LedgerConflict)
      return { status: 409, body: { error: 'not_pending', actionId, state: err.actual } };
    throw err;
  }
  if (result.outcome === 'fingerprint_mismatch')
    return { status: 409, body: { error: 'fingerprint_mismatch', actionId } };
  if (result.outcome === 'void' || result.decision.approver === APPROVAL_VOID) {
    // The run finished while it waited (cancelled, say): the approval authorises nothing.
    return { status: 409, body: { error: 'run_finished', ...result.decision } };
  }
  if (result.outcome === 'expired' || result.decision.reason === 'approval_expired') {
    await stopRun(ctx, rec.runId, {
      expected: ['waiting_approval'],
      status: 'failed',
      reason: 'approval_expired',
      now: Date.now(),
    });
    await ctx.redis.zrem(ctx.keys.approvals(ctx.keys.shardOf(rec.runId)), actionId);
    return { status: 409, body: { error: 'approval_expired', ...result.decision } };
  }
  if (result.outcome === 'decided') {
    await ctx.store.recordOperatorAction(rec.runId, {
      action: decision,
      by: op.name,
      at: result.decision.decidedAt,
      actionId,
      detail: result.decision.state,
    });
  }
  // Every caller resumes: if the first decider died before resuming, the second (or the sweep) finishes the job.
  const resumed = await resumeParked(ctx, rec.runId, 'waiting_approval');
  // The run ended (a cancel between the decision and the resume) or a later run superseded it: void.
  const voided = await settleUnresumed(ctx, rec.runId, actionId, resumed);
  await ctx.redis.zrem(ctx.keys.approvals(ctx.keys.shardOf(rec.runId)), actionId);
  if (voided) return { status: 409, body: voidAnswer(result.decision, voided) };
  return { status: 200, body: { ...result.decision, alreadyDecided: result.outcome === 'already_decided' } };
}

/** The answer to a decision made void: the run's status, the action's final state, and why. */
function voidAnswer(decision: object, v: VoidedDecision): Record<string, unknown> {
  return {
    ...decision,
    error: v.laterRunId ? 'run_superseded' : 'run_finished',
    state: v.state,
    runStatus: v.runStatus,
    ...(v.cancelReason ? { cancelReason: v.cancelReason } : {}),
    ...(v.laterRunId ? { laterRunId: v.laterRunId } : {}),
    message: v.laterRunId
      ? `a later run of the subject (${v.laterRunId}) superseded the run: the decision is void`
      : `the run is ${v.runStatus}: the decision is void, nothing will be sent`,
  };
}

export type Finding = 'confirmed' | 'not_sent' | 'compensate';

/**
 * An operator's finding on a human-queue item (see reconciliations.ts for what
 * each finding does). `receipt` is required for confirmed (the service's id).
 */
export async function resolveHumanItem(
  ctx: EngineContext,
  ledger: Ledger,
  compensations: Compensations,
  op: Operator,
  actionId: string,
  finding: Finding,
  receipt: string | undefined,
  evidence: unknown,
): Promise<ActionAnswer> {
  const rec = await visibleAction(ctx, ledger, op, actionId);
  if (!rec) return NO_ACTION;
  const by = op.name;
  const ev = {
    by,
    why: `operator finding: ${finding}`,
    evidence: { finding, evidence, ...(receipt ? { receipt } : {}) },
  };
  const journal = () =>
    ctx.store.recordOperatorAction(rec.runId, { action: 'resolve', by, at: Date.now(), actionId, detail: finding });
  try {
    if (finding === 'compensate') {
      const result = await compensations.compensate(rec, by, ev.evidence);
      const after = await ledger.get(rec.runId, actionId);
      await journal();
      return {
        status: result.inProgress ? 202 : 200,
        body: {
          actionId,
          runId: rec.runId,
          state: after?.state,
          resumed: false,
          operator: by,
          compensation: result.compensation.actionId,
          compensationState: result.compensation.state,
          ...(result.compensation.receipt ? { compensationReceipt: result.compensation.receipt } : {}),
          inProgress: result.inProgress,
          run: result.run,
        },
      };
    }
    if (finding === 'confirmed') {
      const output = JSON.stringify({ receipt, confirmedBy: 'operator' });
      await ledger.transition(rec.runId, actionId, 'needs_human', 'confirmed', ev, {
        receipt: receipt!,
        output,
        outcome: 'confirmed_by_operator',
      });
    } else {
      await ledger.transition(rec.runId, actionId, 'needs_human', 'safe_retry', ev);
    }
  } catch (err) {
    if (err instanceof LedgerConflict)
      return { status: 409, body: { error: 'not_in_human_queue', actionId, state: err.actual } };
    if (err instanceof CompensationRefused)
      return { status: 409, body: { error: err.code, actionId, message: err.message } };
    throw err;
  }
  await journal();
  if (rec.compensates) {
    // A compensation resolved by a person: finish it (a safe_retry is sent once more with its key) and end the run;
    // never resume the agent.
    const result = await compensations.drive(
      (await ledger.get(rec.runId, actionId))!,
      await compensations.requireSpec(rec.runId),
      by,
    );
    return {
      status: 200,
      body: {
        actionId,
        runId: rec.runId,
        state: result.compensation.state,
        resumed: false,
        compensates: rec.compensates,
        run: result.run,
        operator: by,
      },
    };
  }
  const resumed = await resumeParked(ctx, rec.runId, 'needs_human');
  const after = await ledger.get(rec.runId, actionId);
  const body = { actionId, runId: rec.runId, state: after?.state, resumed: resumed.resumed, operator: by };
  if (!('laterRunId' in resumed)) return { status: 200, body };
  // The finding stands (it is the effect's truth); the run does not go on next to the later one.
  const run = await endSuperseded(ctx, ledger, rec.runId, resumed.laterRunId);
  return { status: 200, body: { ...body, laterRunId: resumed.laterRunId, runStatus: run } };
}

/**
 * A needs_human run a later run of its subject superseded, after a person's finding: it will not
 * come back to work, so it ends `failed` / `superseded: <later run>`, unless another of its actions
 * still waits for a person (then it stays parked until that one is resolved). Returns its status.
 */
async function endSuperseded(ctx: EngineContext, ledger: Ledger, runId: string, laterRunId: string): Promise<string> {
  const waiting = (await ledger.listForRun(runId)).some(
    (a) => a.state === 'needs_human' || (a.state === 'planned' && a.approvalExpiresAt !== undefined),
  );
  if (waiting) return 'needs_human';
  const r = await stopRun(ctx, runId, {
    expected: ['needs_human'],
    status: 'failed',
    reason: `superseded: ${laterRunId}`,
    now: Date.now(),
  });
  return r.status;
}

/**
 * Cancel: a parked run at once, a running one at its next commit (see
 * cancel.ts). The reason names the operator: `cancelled_by_operator: requested by <name>`.
 * The run's child runs (agent tools) are cancelled with it, and theirs, each `parent_cancelled: <parent>`;
 * a child the cascade misses (this process dies) ends at its next step, finding its parent ended.
 */
export async function cancelRun(ctx: EngineContext, op: Operator, runId: string): Promise<ActionAnswer> {
  if (!isRunId(runId) || !(await operatorSeesRun(ctx, op, runId))) return NO_RUN;
  let result;
  try {
    result = await cancelOne(ctx, runId, `cancelled_by_operator: requested by ${op.name}`, op.name);
  } catch (err) {
    if (err instanceof FenceError && err.code === 'run_missing') return NO_RUN;
    throw err;
  }
  if (!result.stopped && TERMINAL.has(result.status))
    return { status: 409, body: { error: 'run_finished', runId, status: result.status } };
  await cancelChildren(ctx, runId, op.name);
  return {
    status: result.stopped ? 200 : 202,
    body: { runId, status: result.status, cancelled: result.stopped ? 'now' : 'at_next_commit', operator: op.name },
  };
}

/** Every child run of `runId`, and theirs, cancelled (one that ended already is left as it is). */
async function cancelChildren(ctx: EngineContext, runId: string, by: string): Promise<void> {
  for (const child of await childRunsOf(ctx).childrenOf(runId)) {
    const r = await cancelOne(ctx, child, `parent_cancelled: ${runId}`, by).catch((err: unknown) => {
      if (err instanceof FenceError && err.code === 'run_missing') return undefined;
      throw err;
    });
    if (r) await cancelChildren(ctx, child, by);
  }
}

/** One run's cancel: its status afterwards, and whether it was ended now. Throws FenceError run_missing. */
async function cancelOne(
  ctx: EngineContext,
  runId: string,
  reason: string,
  by: string,
): Promise<{ stopped: boolean; status: string }> {
  // A run still waiting in its tenant's line (flow control) never started: taken out of the line, it is cancelled at
  // once.
  const neverStarted = (await ctx.admission?.withdraw(runId)) === true;
  // A run parked on a wait has a delayed wake job: taken out of the queue once the run is cancelled.
  const [was, wakeJobId] = await ctx.redis.hmget(ctx.keys.run(runId).run, 'status', 'jobId');
  await releaseWaitForCancel(ctx, runId);
  const result = await stopRun(ctx, runId, {
    expected: ['waiting_approval', 'needs_human', ...WAIT_STATUSES, ...(neverStarted ? ['queued'] : [])],
    status: 'cancelled',
    reason,
    now: Date.now(),
    requestCancel: true,
  });
  // At work but waiting (an outage, a follow-up, a rate limit): its step meets the cancel now.
  if (!result.stopped && !TERMINAL.has(result.status)) await wakeForCancel(ctx, runId);
  // Parked (no step in flight): the journal gets the operator's entry now. A running run's
  // cancel is journalled by its next commit, as a status entry whose reason names the operator.
  if (result.stopped) {
    await ctx.store.recordOperatorAction(runId, { action: 'cancel', by, at: Date.now(), detail: 'cancelled' });
    // Cancelled while waiting for approval: nobody is asked to decide for it any more.
    await withdrawApprovals(ctx, runId, reason);
    // Its step 1 job waited in the delayed set for an admission that will not come.
    if (neverStarted) await ctx.queues.forRun(runId).remove(stepJobId(runId, 1));
    // If this fails, the wake job finds the run cancelled when it fires and does nothing.
    if (isWaitStatus(was ?? '') && wakeJobId)
      await ctx.queues
        .forRun(runId)
        .remove(wakeJobId)
        .catch(() => 0);
    // A child cancelled on its own: its parent resumes now, with the cancel as the call's tool error.
    const parent = (await ctx.store.readSpec(runId).catch(() => undefined))?.parent;
    if (parent) await childRunsOf(ctx).wakeParent(parent.runId, runId);
  }
  return result;
}

/**
 * Retry a stopped run from its last commit (src/runs/retryRun.ts), recorded under the
 * operator's name. 404 for a run the operator may not see; 409 naming the status or
 * what must happen first; 400 naming the field whose extension passes LIMIT_MAX_*.
 */
export async function retryStoppedRun(
  ctx: EngineContext,
  op: Operator,
  runId: string,
  ext: RetryExtension,
): Promise<ActionAnswer> {
  if (!isRunId(runId) || !(await operatorSeesRun(ctx, op, runId))) return NO_RUN;
  const r = await retryRun(ctx, runId, op.name, ext);
  if (r.ok) {
    await holdSlot(ctx, runId);
    return {
      status: 200,
      body: {
        runId,
        status: 'running',
        from: r.from,
        step: r.step,
        jobId: r.jobId,
        limits: r.limits,
        extension: r.extension,
        operator: op.name,
      },
    };
  }
  switch (r.code) {
    case 'run_missing':
      return NO_RUN;
    case 'not_retryable':
      return {
        status: 409,
        body: {
          error: 'not_retryable',
          runId,
          status: r.status,
          message: `the run is ${r.status}: only failed, budget_exceeded or needs_human runs are retried`,
        },
      };
    case 'version_mismatch':
      return {
        status: 409,
        body: {
          error: r.code,
          runId,
          status: r.status,
          message:
            'the run is pinned to another agent version: a retry would park it again (continue or cancel it instead)',
        },
      };
    case 'approval_expired':
      return {
        status: 409,
        body: {
          error: r.code,
          runId,
          status: r.status,
          message: 'its approval expired, which is final: a retry would fail again',
        },
      };
    case 'moved_on':
      return {
        status: 409,
        body: { error: r.code, runId, message: 'the run changed while the retry was prepared: look again' },
      };
    case 'extension_required':
      return {
        status: 409,
        body: {
          error: r.code,
          runId,
          budget: r.budget,
          message: `the run stopped on its ${r.budget} budget: a retry needs more of it (${r.budget === 'wall_clock' ? 'wallMs' : r.budget})`,
        },
      };
    case 'budget_exhausted':
      return {
        status: 409,
        body: {
          error: r.code,
          runId,
          budget: r.budget,
          message: `the run's ${r.budget} budget leaves no room: it would stop again at once`,
        },
      };
    case 'tenant_budget_exhausted':
      return {
        status: 409,
        body: {
          error: r.code,
          runId,
          message: "the tenant's daily token budget is used up: the run would stop again at once",
        },
      };
    case 'action_waiting':
      return {
        status: 409,
        body: {
          error: r.code,
          runId,
          actionId: r.actionId,
          message:
            'an action of the run waits for a person: resolve it or decide its approval first (that resumes the run)',
        },
      };
    case 'superseded':
      return {
        status: 409,
        body: {
          error: 'run_superseded',
          runId,
          laterRunId: r.laterRunId,
          message: `a later run of the subject (${r.laterRunId}) superseded this one: only the latest run goes on`,
        },
      };
    case 'over_limit':
      return {
        status: 400,
        body: {
          error: 'invalid_request',
          fields: [{ path: r.field, message: `the run's total would pass this deployment's limit of ${r.limit}` }],
        },
      };
  }
}
