/**
 * Retries live in code, never in the model's context: a retry the
 * model saw would grow its context and invite it to retry on its own. Only
 * RetryableError (nothing left the process: 429, 503, refused, timeout of a
 * call with no outside effect) is retried, with capped exponential backoff and
 * full jitter, honouring Retry-After; anything else propagates at once. A
 * deadline bounds the whole: no backoff is slept past it.
 */
import { isRetryable, type RetryableError } from './errors.js';
import { DeadlineError } from './timeout.js';

export interface RetryPolicy {
  maxAttempts: number;
  baseMs: number;
  maxMs: number;
}

export interface RetryDeps {
  random?: () => number;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  signal?: AbortSignal;
  onRetry?: (attempt: number, err: RetryableError, delayMs: number) => void;
  /** Epoch ms: a backoff that would end at or past it is not slept; DeadlineError (cause: the last error) instead. */
  deadlineAt?: number;
  now?: () => number;
}

export function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    // The signal's own reason (a DeadlineError, the caller's cancel) is what the caller's catch expects.
    // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export function backoffMs(attempt: number, policy: RetryPolicy, random: () => number): number {
  const ceiling = Math.min(policy.maxMs, policy.baseMs * 2 ** (attempt - 1));
  return Math.floor(random() * ceiling);
}

/** Runs fn(attempt) until it succeeds, throws a non-retryable error, or attempts run out. */
export async function withRetry<T>(
  policy: RetryPolicy,
  fn: (attempt: number) => Promise<T>,
  deps: RetryDeps = {},
): Promise<T> {
  const random = deps.random ?? Math.random;
  const sleep = deps.sleep ?? abortableSleep;
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn(attempt);
    } catch (err) {
      if (!isRetryable(err) || attempt >= policy.maxAttempts) throw err;
      const delay = Math.min(policy.maxMs, Math.max(err.retryAfterMs ?? 0, backoffMs(attempt, policy, random)));
      if (deps.deadlineAt !== undefined && (deps.now ?? Date.now)() + delay >= deps.deadlineAt)
        throw new DeadlineError(deps.deadlineAt, err);
      deps.onRetry?.(attempt, err, delay);
      await sleep(delay, deps.signal);
    }
  }
}
