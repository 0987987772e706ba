/** The error hierarchy: every class has a stable code, keeps its cause, and says what a retry should do. */
import { describe, expect, it } from 'vitest';
import {
  AgentError,
  CancelledError,
  errorCode,
  FenceError,
  InvalidStepInput,
  InvariantError,
  isRetryable,
  OutcomeUnknownError,
  RetryableError,
  retryKindOf,
  ShutdownError,
  TerminalError,
  ConfigError,
} from '../../src/core/errors.js';
import { DeadlineError, TimeoutError } from '../../src/core/timeout.js';
import { JournalCorrupt, decodeEntry } from '../../src/core/journal.js';
import { LedgerConflict } from '../../src/ledger/ledger.js';
import { CompensationRefused } from '../../src/ledger/compensation.js';
import { RedisMisconfigured, RedisUnreachable } from '../../src/store/connect.js';
import { InvalidRunRequest } from '../../src/producer/intake.js';
import { PortInUseError } from '../../src/server/boot.js';
import { BudgetStopError } from '../../src/budget/tenantBudget.js';

describe('the error hierarchy', () => {
  const cause = new Error('underneath');
  const cases: [AgentError, string, string][] = [
    [new AgentError('action_missing', 'm'), 'action_missing', 'redeliver'],
    [new FenceError('lock_lost', 'm'), 'lock_lost', 'fenced'],
    [new CancelledError('m'), 'run_cancelled', 'cancelled'],
    [new TerminalError('model_failed', 'm'), 'model_failed', 'terminal'],
    [new RetryableError('m', 1500), 'transient', 'retryable'],
    [new OutcomeUnknownError('m'), 'transient', 'outcome_unknown'],
    [new ShutdownError(), 'shutting_down', 'shutdown'],
    [new InvalidStepInput('invalid_spec', 'limits.maxSteps'), 'invalid_spec', 'terminal'],
    [new InvariantError('internals_changed', 'm'), 'internals_changed', 'terminal'],
    [new TimeoutError(10), 'timeout', 'redeliver'],
    [new DeadlineError(0), 'deadline', 'terminal'],
    [new JournalCorrupt('m'), 'journal_corrupt', 'terminal'],
    [new ConfigError(['X'], 'm'), 'config_invalid', 'terminal'],
    [new LedgerConflict('planned', 'confirmed'), 'ledger_conflict', 'redeliver'],
    [new CompensationRefused('m'), 'compensation_refused', 'terminal'],
    [new RedisUnreachable('m'), 'redis_unreachable', 'terminal'],
    [new RedisMisconfigured('m'), 'redis_misconfigured', 'terminal'],
    [new InvalidRunRequest([{ path: 'a', message: 'b' }]), 'invalid_input', 'terminal'],
    [new PortInUseError(1, 'PORT'), 'port_in_use', 'terminal'],
    [new BudgetStopError({ kind: 'tokens', reason: 'r' }), 'budget_exceeded', 'terminal'],
  ];

  it.each(cases)('%s has its code and retry kind, and is an AgentError named after its class', (err, code, retry) => {
    expect(err).toBeInstanceOf(AgentError);
    expect(err).toBeInstanceOf(Error);
    expect(err.code).toBe(code);
    expect(err.retry).toBe(retry);
    expect(retryKindOf(err)).toBe(retry);
    expect(errorCode(err)).toBe(code);
    expect(err.name).toBe(err.constructor.name);
  });

  it('keeps the cause it wraps (ES2022 ErrorOptions)', () => {
    expect(new AgentError('action_missing', 'm', {}, { cause }).cause).toBe(cause);
    expect(new RetryableError('m', undefined, {}, { cause }).cause).toBe(cause);
    expect(new OutcomeUnknownError('m', {}, { cause }).cause).toBe(cause);
    expect(new CancelledError('m', {}, { cause }).cause).toBe(cause);
    expect(new ShutdownError({ cause }).cause).toBe(cause);
    expect(new InvalidStepInput('invalid_job_data', 'runId', { cause }).cause).toBe(cause);
    expect(new DeadlineError(0, cause).cause).toBe(cause);
    expect(new DeadlineError(0).cause).toBeUndefined();
    expect(new RedisUnreachable('m', { cause }).cause).toBe(cause);
    expect(new PortInUseError(1, 'PORT', { cause }).cause).toBe(cause);
  });

  it('a journal entry that is not JSON is JournalCorrupt with the parse error as its cause', () => {
    const err = (() => {
      try {
        decodeEntry('{not json', 3);
      } catch (e) {
        return e;
      }
    })() as JournalCorrupt;
    expect(err).toBeInstanceOf(JournalCorrupt);
    expect(err.cause).toBeInstanceOf(SyntaxError);
  });

  it('only a RetryableError is retried in code; an unknown error fails the delivery', () => {
    expect(isRetryable(new RetryableError('m'))).toBe(true);
    expect(isRetryable(new OutcomeUnknownError('m'))).toBe(false);
    expect(isRetryable(new Error('m'))).toBe(false);
    expect(retryKindOf(new Error('m'))).toBe('redeliver');
    expect(retryKindOf('a string')).toBe('redeliver');
  });

  it('errorCode falls back to the class name, then to "error"', () => {
    expect(errorCode(new TypeError('x'))).toBe('TypeError');
    expect(errorCode({ code: 'Not Snake' })).toBe('error');
    expect(errorCode(undefined)).toBe('error');
  });
});
