/**
 * The engine recognises its errors by `code` and `retry`, not by class: an agents module that resolved another
 * copy of the package (another path, another version) throws errors of other classes that must mean the same.
 */
import { describe, expect, it } from 'vitest';
import {
  hasErrorCode,
  isAgentError,
  isKeyConflict,
  isOutcomeUnknown,
  isRetryable,
  KeyConflictError,
  OutcomeUnknownError,
  RetryableError,
  retryKindOf,
} from '../../src/core/errors.js';
import { withRetry } from '../../src/core/withRetry.js';

/** What another copy of src/core/errors.ts raises: the same fields, another class. */
class Foreign extends Error {
  readonly details: Record<string, unknown> = {};
  constructor(
    readonly code: string,
    readonly retry: string,
    readonly retryAfterMs?: number,
  ) {
    super(`${code} from another copy`);
  }
}

describe('error guards', () => {
  it("recognise the engine's own classes", () => {
    expect(isRetryable(new RetryableError('503'))).toBe(true);
    expect(isOutcomeUnknown(new OutcomeUnknownError('timeout'))).toBe(true);
    expect(isKeyConflict(new KeyConflictError('other body'))).toBe(true);
  });

  it("recognise another copy's errors by code and retry", () => {
    expect(new Foreign('transient', 'retryable')).not.toBeInstanceOf(RetryableError);
    expect(isRetryable(new Foreign('transient', 'retryable'))).toBe(true);
    expect(isOutcomeUnknown(new Foreign('transient', 'outcome_unknown'))).toBe(true);
    expect(isKeyConflict(new Foreign('idempotency_conflict', 'terminal'))).toBe(true);
    expect(hasErrorCode(new Foreign('invalid_input', 'terminal'), 'invalid_input')).toBe(true);
    expect(retryKindOf(new Foreign('run_cancelled', 'cancelled'))).toBe('cancelled');
  });

  it("do not take any error with a code for the engine's", () => {
    const nodeError = Object.assign(new Error('refused'), { code: 'ECONNREFUSED' });
    expect(isAgentError(nodeError)).toBe(false);
    expect(isAgentError(new Foreign('transient', 'sometimes'))).toBe(false);
    expect(isAgentError({ code: 'transient', retry: 'retryable' })).toBe(false);
    expect(retryKindOf(nodeError)).toBe('redeliver');
  });

  it("withRetry retries another copy's RetryableError, honouring its Retry-After", async () => {
    const slept: number[] = [];
    let n = 0;
    const thrown = await withRetry(
      { maxAttempts: 3, baseMs: 1, maxMs: 1000 },
      async () => {
        n++;
        throw new Foreign('transient', 'retryable', 400);
      },
      { sleep: async (ms) => void slept.push(ms), random: () => 0 },
    ).catch((e: unknown) => e);
    expect(n).toBe(3);
    expect(slept).toEqual([400, 400]);
    expect(thrown).toBeInstanceOf(Foreign);
  });
});
