/**
 * A recorded cancel (`cancelRequested` on the run, POST /v1/runs/:id/cancel) stops the model too: it is
 * honoured before every model attempt (model.ts, `beforeAttempt`) and before every wait (waits.ts: outage,
 * follow-up, version hand-back, rate limit), so a run queued behind a provider outage ends `cancelled` within
 * one attempt, with no model call after the cancel. The first attempt of a delivery reads the flag the load
 * stage already has (a redelivery reads the run's state; a job the previous commit made has none: that commit
 * would have ended the run had a cancel been recorded, so only a cancel recorded since can slip one attempt);
 * a retry attempt and a wait read it again (one HGET). The commit then ends the run `cancelled` with the
 * cancel's reason (commitStep-23.lua: a recorded cancel wins over any status).
 */
import { isTerminal } from '../../core/status.js';
import { parentMovedOn } from '../../runs/children.js';
import type { StepEnv } from './env.js';
import { stopPlan, type CommitPlan, type StepState } from './state.js';

/** Where a cancel was honoured (the metric's label). */
export type CancelPoint = 'model_attempt' | 'outage_wait' | 'follow_up_wait' | 'version_hand_back' | 'rate_limit_wait';

/** Whether the run's cancel is recorded: the state's flag, or read again (`fresh`) before a retry or a wait. */
export async function cancelRecorded(env: StepEnv, state: StepState, fresh: boolean): Promise<boolean> {
  if (state.cancelRequested) return true;
  return fresh && (await env.store.cancelRequested(state.runId));
}

/** The commit that ends the run `cancelled` at `at`, with what the step's attempts spent: counted and logged. */
export function cancelledPlan(env: StepEnv, state: StepState, at: CancelPoint, charged = 0): CommitPlan {
  env.metrics.cancelsHonoured.inc({ at });
  state.log.info({ code: 'cancel_honoured', at }, 'cancel recorded: no model call, the run ends cancelled');
  return {
    ...stopPlan(state.step, { status: 'cancelled', reason: `cancelled before the ${at}` }),
    tokensDelta: charged,
  };
}

/**
 * A child run whose parent ended (cancelled, or any terminal status) or is gone ends `cancelled` before its step
 * asks the model: no orphan works on for nobody. So does a child whose parent took its outcome and moved on
 * (src/runs/children.ts, parentMovedOn: its wake charged what the child had spent then, and nothing would charge
 * more): reason `parent_moved_on: <parent>`. Operators' retries and resumes of such a child are refused before they
 * put it back to work; this catches what slipped past them (the parent's wake committing between that check and
 * their script, on another shard) and any other path back to work (a stuck-run sweep re-creating its job). Read once
 * per step of a child (one HMGET on the parent's run). A parent's cancel also cancels its children at once
 * (src/http/operators/actions.ts); this catches a child that cascade missed (the API died in between) or a parent
 * that ended otherwise.
 */
export async function parentEnded(env: StepEnv, state: StepState): Promise<CommitPlan | undefined> {
  const parent = state.spec.parent;
  if (!parent || !env.children) return undefined;
  const standing = await env.children.parentStanding(parent.runId);
  if (!parentMovedOn(standing, { runId: state.runId, step: parent.step })) return undefined;
  const was = standing?.status ?? 'missing';
  if (standing && !isTerminal(standing.status)) {
    env.metrics.childRuns.inc({ event: 'orphaned', outcome: 'parent_moved_on' });
    state.log.info(
      { code: 'parent_moved_on', parentRunId: parent.runId, parentStatus: was },
      'parent took the child outcome and moved on: child ends',
    );
    return stopPlan(state.step, { status: 'cancelled', reason: `parent_moved_on: ${parent.runId}` });
  }
  env.metrics.childRuns.inc({ event: 'orphaned', outcome: was });
  state.log.info({ code: 'parent_ended', parentRunId: parent.runId, parentStatus: was }, 'parent ended: child ends');
  return stopPlan(state.step, { status: 'cancelled', reason: `parent_ended: ${parent.runId} ${was}` });
}
