/** Negative return codes of the Lua scripts (src/store/lua), mapped to typed errors. */
import { AgentError, CancelledError, FenceError } from '../core/errors.js';

export enum ScriptCode {
  LockLost = -1,
  StaleStep = -2,
  RunMissing = -3,
  RunNotRunning = -4,
  DecisionExists = -5,
  ActionMissing = -10,
  StateMismatch = -11,
  IllegalTransition = -12,
  ReservationHeld = -13,
  FingerprintMismatch = -14,
  AlreadyDecided = -15,
  TenantBudgetExceeded = -16,
  CancelRequested = -17,
  /** retryRun-17.lua: a budget of the run leaves no room (the retry would stop again at once). */
  BudgetExhausted = -18,
  /** retryRun-17.lua: an action of the run waits for a person (human queue or approval), or its compensation is pending. */
  ActionWaiting = -19,
  NotVersionParked = -20,
  VersionChanged = -21,
  /** journalObservation-5.lua: the step's decision is not journalled (an observation never precedes it). */
  DecisionMissing = -22,
  /** A script that brings a run back to work: a later run of its subject superseded it (includes/subject.lua). */
  Superseded = -23,
  /**
   * ledgerPlan-7.lua, commitStep-23.lua: the server does not hold the decision the caller acts on as the step's
   * journalled one (a failover took it back, or another delivery decided the step again): nothing is written.
   */
  DecisionNotJournalled = -24,
  /**
   * retryRun-17.lua: the run's customer text was erased (src/archive/erasure.ts) and the step a retry would run holds a
   * journalled decision, whose tool calls' arguments the erasure replaced: the step would act on the marker.
   */
  RunErased = -25,
  /**
   * A script that brings a run back to work: the run is a child whose parent's wake took its outcome
   * (takeChildOutcome-1.lua marked it; includes/outcomeTaken.lua). Detail: the parent's run id.
   */
  ParentMovedOn = -26,
}

/**
 * The one return convention of the scripts: a negative number, alone or first
 * in a reply array, is a ScriptCode; anything else is the script's result.
 */
export function replyCode(reply: unknown): number | undefined {
  const first: unknown = Array.isArray(reply) ? (reply as unknown[])[0] : reply;
  return isScriptError(first) ? first : undefined;
}

/** The reply, or the typed error of its code (scriptError, with `context`). */
export function expectReply(reply: unknown, context: Record<string, unknown> = {}): unknown {
  const code = replyCode(reply);
  if (code !== undefined) throw scriptError(code, context);
  return reply;
}

export function isScriptError(result: unknown): result is number {
  return typeof result === 'number' && result < 0;
}

export function scriptError(code: number, context: Record<string, unknown> = {}): AgentError {
  switch (code) {
    case ScriptCode.LockLost:
      return new FenceError('lock_lost', 'the job lock moved to another worker', context);
    case ScriptCode.StaleStep:
      return new FenceError('stale_step', 'the run cursor moved past this step', context);
    case ScriptCode.RunMissing:
      return new FenceError('run_missing', 'the run does not exist', context);
    case ScriptCode.RunNotRunning:
      return new FenceError('run_not_running', 'the run is not running', context);
    case ScriptCode.DecisionExists:
      return new FenceError('decision_exists', 'this step already has a journalled decision', context);
    case ScriptCode.ActionMissing:
      return new AgentError('action_missing', 'no ledger entry for this action', context);
    case ScriptCode.StateMismatch:
      return new AgentError('ledger_conflict', 'the ledger entry is not in the expected state', context);
    case ScriptCode.IllegalTransition:
      return new AgentError('illegal_transition', 'that ledger transition is not allowed', context);
    case ScriptCode.ReservationHeld:
      return new AgentError('ledger_conflict', 'the idempotency key is reserved by another action', context);
    case ScriptCode.FingerprintMismatch:
      return new AgentError('ledger_conflict', 'the content fingerprint does not match', context);
    case ScriptCode.AlreadyDecided:
      return new AgentError('ledger_conflict', 'already decided', context);
    case ScriptCode.CancelRequested:
      return new CancelledError("the run's cancel is recorded: nothing more is dispatched", context);
    case ScriptCode.BudgetExhausted:
      return new AgentError('budget_exhausted', 'a budget of the run leaves no room', context);
    case ScriptCode.ActionWaiting:
      return new AgentError('action_waiting', 'an action of the run waits for a person', context);
    case ScriptCode.NotVersionParked:
      return new AgentError('version_mismatch', 'the run is not parked for a version change', context);
    case ScriptCode.VersionChanged:
      return new AgentError(
        'version_mismatch',
        'the run is no longer pinned to the version it was parked with',
        context,
      );
    case ScriptCode.DecisionMissing:
      return new AgentError('invariant', "an observation before its step's decision was journalled", context);
    case ScriptCode.DecisionNotJournalled:
      return new FenceError(
        'decision_not_journalled',
        "the store does not hold this delivery's decision as the step's journalled one",
        context,
      );
    case ScriptCode.Superseded:
      return new AgentError('run_superseded', 'a later run of the subject superseded the run', context);
    case ScriptCode.ParentMovedOn:
      return new AgentError('parent_moved_on', "the run's parent took its outcome and moved on", context);
    case ScriptCode.RunErased:
      return new AgentError('run_erased', 'the run was erased and its step would act again on its decision', context);
    default:
      return new AgentError('ledger_conflict', `unknown script code ${code}`, context);
  }
}
