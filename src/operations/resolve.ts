/**
 * An operator's finding on a human-queue item: `confirmed` (the effect happened: the service's receipt is required),
 * `not_sent` (it did not: the action may be sent once more with its key), `compensate` (undo it with the tool's
 * compensation) or `accept` (on an original whose compensation its service refused: the effect stands, the run ends
 * without compensating it). The finding is the effect's truth; the run resumes after it, unless the item was a
 * compensation (the run then ends), a later run of the subject superseded the run (it then ends `superseded`), or the
 * run is a child whose parent took its outcome and moved on (it then ends `cancelled` / `parent_moved_on`), or its
 * stored spec no longer parses (it then ends `failed` / `invalid_spec: <field>`).
 */
import type { EngineContext } from '../runs/engineContext.js';
import { CompensationRefused, deliveryRefused, type Compensations } from '../ledger/compensation.js';
import { LedgerConflict, type ActionRecord, type Ledger } from '../ledger/ledger.js';
import { resumeParked } from '../runs/resume.js';
import { stopRun } from '../runs/stop.js';
import { readRun } from '../store/runRecord.js';
import type { RunStatus } from '../core/status.js';
import { visibleAction, type Actor } from './actor.js';
import { accepted, done, NO_ACTION, refused, type Outcome } from './outcome.js';

export type Finding = 'confirmed' | 'not_sent' | 'compensate' | 'accept';

export interface FindingRequest {
  finding: Finding;
  /** The service's id of the effect: required for `confirmed`. */
  receipt?: string | undefined;
  evidence: unknown;
}

export async function resolveHumanItem(
  ctx: EngineContext,
  ledger: Ledger,
  compensations: Compensations,
  actor: Actor,
  actionId: string,
  req: FindingRequest,
): Promise<Outcome<Record<string, unknown>>> {
  const rec = await visibleAction(ctx, ledger, actor, actionId);
  if (!rec) return NO_ACTION;
  const journal = () =>
    ctx.store.recordOperatorAction(rec.runId, {
      action: 'resolve',
      by: actor.name,
      at: Date.now(),
      actionId,
      detail: req.finding,
    });
  try {
    if (req.finding === 'accept') {
      const answer = await accept(ctx, ledger, rec, actor.name, req);
      if (answer.kind === 'done') await journal();
      return answer;
    }
    if (req.finding === 'compensate') {
      const answer = await compensate(ledger, compensations, rec, actor.name, req);
      await journal();
      return answer;
    }
    await recordFinding(ledger, rec, actor.name, req);
    // A compensation (ordered by a person, not the model) is sent whatever the run: finishCompensation below.
    if (req.finding === 'not_sent' && !rec.compensates) await rejectUnsentOfCancelled(ctx, ledger, rec, actor.name);
  } catch (err) {
    if (err instanceof LedgerConflict) return refused('not_in_human_queue', { actionId, state: err.actual });
    if (err instanceof CompensationRefused) return refused('compensation_refused', { actionId, message: err.message });
    throw err;
  }
  await journal();
  if (rec.compensates) return finishCompensation(ledger, compensations, rec, actor.name);
  return resumeAfterFinding(ctx, ledger, rec, actor.name);
}

function evidenceOf(by: string, req: FindingRequest) {
  return {
    by,
    why: `operator finding: ${req.finding}`,
    evidence: { finding: req.finding, evidence: req.evidence, ...(req.receipt ? { receipt: req.receipt } : {}) },
  };
}

/** `confirmed` records the receipt as the action's outcome; `not_sent` lets it be sent once more with its key. */
async function recordFinding(ledger: Ledger, rec: ActionRecord, by: string, req: FindingRequest): Promise<void> {
  const ev = evidenceOf(by, req);
  if (req.finding === 'confirmed') {
    const output = JSON.stringify({ receipt: req.receipt, confirmedBy: 'operator' });
    await ledger.transition(rec.runId, rec.actionId, 'needs_human', 'confirmed', ev, {
      receipt: req.receipt!,
      output,
      outcome: 'confirmed_by_operator',
    });
  } else {
    await ledger.transition(rec.runId, rec.actionId, 'needs_human', 'safe_retry', ev);
  }
}

/**
 * `not_sent` on an action of a cancelled run (cancelled while the action waited for a person): nothing was sent, and
 * nothing will send it (a cancelled run is never resumed nor retried, and its cancel refuses a dispatch). The action
 * ends `rejected` with the cancel as evidence, as a dispatch the cancel refused does (runner.ts, notDispatched), so
 * it does not stay unsettled (an erasure would wait on it). Of a run at work or parked it stays `safe_retry`: the
 * resumed step sends it with its key.
 */
async function rejectUnsentOfCancelled(
  ctx: EngineContext,
  ledger: Ledger,
  rec: ActionRecord,
  by: string,
): Promise<void> {
  const run = await readRun(ctx.redis, ctx.keys, rec.runId, ['cancelReason']);
  if (run?.status !== 'cancelled') return;
  const cancel = run.cancelReason ?? 'cancelled_by_operator';
  const output = { rejected: true, reason: 'cancelled_by_operator', cancel };
  try {
    await ledger.transition(
      rec.runId,
      rec.actionId,
      'safe_retry',
      'rejected',
      { by, why: 'operator finding not_sent on a cancelled run: never sent, and never will be', evidence: { cancel } },
      { output: JSON.stringify(output) },
    );
  } catch (err) {
    // Moved by another request meanwhile (a repeated finding): its move stands.
    if (!(err instanceof LedgerConflict)) throw err;
  }
}

/**
 * Undo the effect with the tool's compensation: accepted while another request drives it, or while it is not sent
 * yet (the reconciler's sweep finishes it).
 */
async function compensate(
  ledger: Ledger,
  compensations: Compensations,
  rec: ActionRecord,
  by: string,
  req: FindingRequest,
): Promise<Outcome<Record<string, unknown>>> {
  const result = await compensations.compensate(rec, by, evidenceOf(by, req).evidence);
  const after = await ledger.get(rec.runId, rec.actionId);
  const value = {
    actionId: rec.actionId,
    runId: rec.runId,
    state: after?.state,
    resumed: false,
    operator: by,
    compensation: result.compensation.actionId,
    compensationState: result.compensation.state,
    ...(result.compensation.receipt ? { compensationReceipt: result.compensation.receipt } : {}),
    // Refused by its service (or never sent): the item stays queued for a person, who may `accept` it.
    ...(deliveryRefused(result.compensation) ? { compensationRefused: true } : {}),
    inProgress: result.inProgress,
    // Not sent (a 429, the service down before the request left): said so, never answered as done; the item stays
    // in the human queue and the reconciler's sweep sends it again with the same key.
    ...(result.unsettled ? { compensationSent: false, compensationError: result.unsettled.error } : {}),
    run: result.run,
    // Delivered while the run was at work (retried or resumed while it was pending): the run goes on, not ended.
    ...(result.runAtWork ? { runAtWork: true } : {}),
  };
  return result.inProgress || result.unsettled ? accepted(value) : done(value);
}

/**
 * A compensation resolved by a person: finish it (a safe_retry is sent once more with its key) and end the run;
 * never resume the agent.
 */
async function finishCompensation(
  ledger: Ledger,
  compensations: Compensations,
  rec: ActionRecord,
  by: string,
): Promise<Outcome<Record<string, unknown>>> {
  const result = await compensations.drive(
    (await ledger.get(rec.runId, rec.actionId))!,
    await compensations.requireSpec(rec.runId),
    by,
  );
  const value = {
    actionId: rec.actionId,
    runId: rec.runId,
    state: result.compensation.state,
    resumed: false,
    compensates: rec.compensates,
    ...(result.unsettled ? { compensationSent: false, compensationError: result.unsettled.error } : {}),
    run: result.run,
    operator: by,
  };
  return result.unsettled ? accepted(value) : done(value);
}

const NOT_QUEUED = 'the action is no longer in the human queue (accepted before)';

/**
 * `accept`: the effect of an original whose compensation settled without delivering (its service refused it, or it
 * was never sent) stands. The run ends `failed` / `compensation_refused: ...` when it is needs_human (a run at work,
 * retried by an earlier release while the compensation was pending, goes on); then the finding is recorded in the
 * original's history and the original leaves the human queue, in one script, so a crash between leaves it queued for
 * a repeat. Refused for any other item: nothing closes an action a compensation may still undo, or one not
 * compensated.
 */
async function accept(
  ctx: EngineContext,
  ledger: Ledger,
  rec: ActionRecord,
  by: string,
  req: FindingRequest,
): Promise<Outcome<Record<string, unknown>>> {
  const { actionId, runId } = rec;
  const comp =
    rec.state === 'compensation_required' && rec.compensatedBy ? await ledger.get(runId, rec.compensatedBy) : undefined;
  if (!comp || !deliveryRefused(comp))
    return refused('compensation_not_refused', {
      actionId,
      state: rec.state,
      ...(comp ? { compensation: comp.actionId, compensationState: comp.state } : {}),
      message: !comp
        ? 'accept closes an action whose compensation its service refused; this one has no compensation'
        : comp.state === 'needs_human'
          ? `its compensation ${comp.actionId} waits for a person: resolve the compensation itself`
          : `its compensation ${comp.actionId} is ${comp.state}, not refused: it ends the run once confirmed`,
    });
  if (!(await ledger.inHumanQueue(runId, actionId)))
    return refused('not_in_human_queue', { actionId, state: rec.state, message: NOT_QUEUED });
  // `rejected`: never sent (the run's cancel refused its dispatch); confirmed `rejected: true`: its service refused it.
  const how = comp.state === 'rejected' ? 'was never sent' : 'was refused by its service';
  const reason = `compensation_refused: action ${actionId}'s compensation ${comp.actionId} ${how}; the effect stands (${by})`;
  const stop = await stopRun(ctx, runId, { expected: ['needs_human'], status: 'failed', reason, now: Date.now() });
  const ev = evidenceOf(by, req);
  const recorded = await ledger.accept(runId, actionId, comp.actionId, {
    ...ev,
    evidence: { ...ev.evidence, compensation: comp.actionId },
  });
  if (recorded === 'not_queued')
    return refused('not_in_human_queue', { actionId, state: rec.state, message: NOT_QUEUED });
  const run = await readRun(ctx.redis, ctx.keys, runId, ['reason']);
  return done({
    actionId,
    runId,
    state: rec.state,
    resumed: false,
    compensation: comp.actionId,
    compensationState: comp.state,
    compensationRefused: true,
    run: { status: run?.status ?? 'missing', reason: run?.reason ?? '', ended: stop.stopped },
    operator: by,
  });
}

async function resumeAfterFinding(
  ctx: EngineContext,
  ledger: Ledger,
  rec: ActionRecord,
  by: string,
): Promise<Outcome<Record<string, unknown>>> {
  const resumed = await resumeParked(ctx, rec.runId, 'needs_human');
  const after = await ledger.get(rec.runId, rec.actionId);
  const value = {
    actionId: rec.actionId,
    runId: rec.runId,
    state: after?.state,
    resumed: resumed.resumed,
    operator: by,
  };
  if ('unreadableSpec' in resumed) {
    // The finding stands (it is the effect's truth); no step could run the run: it ends as its step would end it.
    const field = resumed.unreadableSpec;
    const runStatus = await endUnresumed(ctx, ledger, rec.runId, 'failed', `invalid_spec: ${field}`);
    return done({ ...value, invalidSpec: field, runStatus });
  }
  if ('parentRunId' in resumed) {
    // The finding stands (it is the effect's truth); the child does not go on after its parent took its outcome.
    const { parentRunId, parentStatus } = resumed;
    const runStatus = await endUnresumed(ctx, ledger, rec.runId, 'cancelled', `parent_moved_on: ${parentRunId}`);
    return done({ ...value, parentRunId, parentStatus, runStatus });
  }
  if (!('laterRunId' in resumed)) return done(value);
  // The finding stands (it is the effect's truth); the run does not go on next to the later one.
  const runStatus = await endUnresumed(ctx, ledger, rec.runId, 'failed', `superseded: ${resumed.laterRunId}`);
  return done({ ...value, laterRunId: resumed.laterRunId, runStatus });
}

/**
 * A needs_human run that will not come back to work after a person's finding: a later run of its subject superseded
 * it (it ends `failed` / `superseded: <later run>`), it is a child whose parent took its outcome and moved on (it
 * ends `cancelled` / `parent_moved_on: <parent>`), or its stored spec no longer parses (it ends `failed` /
 * `invalid_spec: <field>`). Unless another of its actions still waits for a person: then it
 * stays parked until that one is resolved. Returns its status.
 */
async function endUnresumed(
  ctx: EngineContext,
  ledger: Ledger,
  runId: string,
  status: 'failed' | 'cancelled',
  reason: string,
): Promise<RunStatus> {
  const waiting = (await ledger.listForRun(runId)).some(
    (a) => a.state === 'needs_human' || (a.state === 'planned' && a.approvalExpiresAt !== undefined),
  );
  if (waiting) return 'needs_human';
  const r = await stopRun(ctx, runId, { expected: ['needs_human'], status, reason, now: Date.now() });
  return r.status;
}
