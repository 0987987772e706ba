/** Retry classification: only RetryableError is retried in code, with capped backoff, honouring Retry-After, never past the deadline. */
import { describe, expect, it } from 'vitest';
import { AgentError, OutcomeUnknownError, RetryableError, TerminalError } from '../../src/core/errors.js';
import { backoffMs, withRetry } from '../../src/core/withRetry.js';
import { DeadlineError } from '../../src/core/timeout.js';

const policy = { maxAttempts: 4, baseMs: 100, maxMs: 1000 };
const noSleep = { sleep: async () => {}, random: () => 1 };

async function attempts(err: () => Error, deps = {}): Promise<{ n: number; thrown: unknown }> {
  let n = 0;
  const thrown = await withRetry(
    policy,
    async () => {
      n++;
      throw err();
    },
    { ...noSleep, ...deps },
  ).catch((e: unknown) => e);
  return { n, thrown };
}

describe('withRetry', () => {
  it('retries a RetryableError until attempts run out, then throws it', async () => {
    const r = await attempts(() => new RetryableError('503'));
    expect(r.n).toBe(4);
    expect(r.thrown).toBeInstanceOf(RetryableError);
  });

  it.each([
    ['an outcome-unknown error (may have left the process)', () => new OutcomeUnknownError('timeout')],
    ['a terminal error', () => new TerminalError('model_failed', 'x')],
    ['a plain AgentError', () => new AgentError('action_missing', 'x')],
    ['an unknown error', () => new Error('x')],
  ])('never retries %s', async (_what, err) => {
    expect((await attempts(err)).n).toBe(1);
  });

  it('backoff doubles from base, capped, and Retry-After wins when longer', async () => {
    expect([1, 2, 3, 4, 5].map((a) => backoffMs(a, policy, () => 1))).toEqual([100, 200, 400, 800, 1000]);
    const delays: number[] = [];
    await attempts(() => new RetryableError('429', 700), {
      onRetry: (_a: number, _e: unknown, d: number) => delays.push(d),
    });
    expect(delays).toEqual([700, 700, 700]);
  });

  it('a backoff that would end past the deadline is not slept: DeadlineError with the last error as cause', async () => {
    const r = await attempts(() => new RetryableError('503'), { now: () => 1000, deadlineAt: 1050 });
    expect(r.n).toBe(1);
    expect(r.thrown).toBeInstanceOf(DeadlineError);
    expect((r.thrown as DeadlineError).cause).toBeInstanceOf(RetryableError);
  });
});
