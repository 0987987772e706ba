/** One return-code convention: each script code maps to one typed error. */
import { describe, expect, it } from 'vitest';
import { AgentError, CancelledError, FenceError } from '../../src/core/errors.js';
import { isScriptError, scriptError, ScriptCode } from '../../src/store/codes.js';

describe('script codes', () => {
  it.each([
    [ScriptCode.LockLost, FenceError, 'lock_lost'],
    [ScriptCode.StaleStep, FenceError, 'stale_step'],
    [ScriptCode.RunMissing, FenceError, 'run_missing'],
    [ScriptCode.RunNotRunning, FenceError, 'run_not_running'],
    [ScriptCode.DecisionExists, FenceError, 'decision_exists'],
    [ScriptCode.ActionMissing, AgentError, 'action_missing'],
    [ScriptCode.StateMismatch, AgentError, 'ledger_conflict'],
    [ScriptCode.IllegalTransition, AgentError, 'illegal_transition'],
    [ScriptCode.ReservationHeld, AgentError, 'ledger_conflict'],
    [ScriptCode.FingerprintMismatch, AgentError, 'ledger_conflict'],
    [ScriptCode.AlreadyDecided, AgentError, 'ledger_conflict'],
    [ScriptCode.CancelRequested, CancelledError, 'run_cancelled'],
    [ScriptCode.NotVersionParked, AgentError, 'version_mismatch'],
    [ScriptCode.VersionChanged, AgentError, 'version_mismatch'],
    [ScriptCode.RunErased, AgentError, 'run_erased'],
    [ScriptCode.ParentMovedOn, AgentError, 'parent_moved_on'],
  ])('code %i is a %o with code %s, carrying its context', (code, cls, errCode) => {
    const err = scriptError(code, { step: 3 });
    expect(err).toBeInstanceOf(cls);
    expect(err.code).toBe(errCode);
    expect(err.details).toEqual({ step: 3 });
  });

  it('fence codes are fenced, a cancel is cancelled', () => {
    expect(scriptError(ScriptCode.LockLost).retry).toBe('fenced');
    expect(scriptError(ScriptCode.CancelRequested).retry).toBe('cancelled');
  });

  it('an unknown negative code is still an error, never a success', () => {
    expect(scriptError(-99).code).toBe('ledger_conflict');
    expect(scriptError(-99).message).toContain('-99');
  });

  it('only negative numbers are script errors', () => {
    expect(isScriptError(-1)).toBe(true);
    expect(isScriptError(0)).toBe(false);
    expect(isScriptError(3)).toBe(false);
    expect(isScriptError('-1')).toBe(false);
    expect(isScriptError([-1])).toBe(false);
  });
});
