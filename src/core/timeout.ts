/**
 * The one timeout for outbound calls (tools, model, lookups).
 *
 * On Node 20, `AbortSignal.any([signal, AbortSignal.timeout(ms)])` can be
 * garbage-collected before it fires: the timeout signal is held only weakly by
 * the combined one, so a GC during the wait leaves a request that never ends.
 * Here the timer is an explicit `setTimeout`, referenced while the call runs
 * (it holds the controller) and cleared when the call settles. The call is also
 * raced against the abort, so a callee that ignores its signal still yields
 * within the timeout. A leaf module: anything may import it.
 */
import { AgentError, type RetryKind } from './errors.js';

const MAX_TIMER_MS = 2 ** 31 - 1;

/** The call ran out of time; `timeoutMs` is the limit it was given. */
export class TimeoutError extends AgentError {
  constructor(readonly timeoutMs: number) {
    super('timeout', `timed out after ${timeoutMs} ms`, { timeoutMs });
  }
}

/**
 * The run's wall-clock deadline passed: nothing more may be waited for.
 * `cause` is the failure it cut short, if any (e.g. the last retryable error).
 */
export class DeadlineError extends AgentError {
  /** Nothing more may be waited for: the step stops on the wall clock (budget_exceeded). */
  override readonly retry: RetryKind = 'terminal';
  constructor(readonly deadlineAt: number, cause?: unknown) {
    super('deadline', `deadline ${new Date(deadlineAt).toISOString()} reached`, { deadlineAt }, cause === undefined ? undefined : { cause });
  }
}

/**
 * Runs fn with a signal that aborts when `parent` aborts (reason: the parent's
 * reason) or after `ms` (reason: onTimeout(), a TimeoutError by default).
 * Rejects with that reason as soon as the signal aborts, whatever fn does with it.
 */
export async function withTimeout<T>(
  ms: number, parent: AbortSignal | undefined, fn: (signal: AbortSignal) => Promise<T>, onTimeout: () => Error = () => new TimeoutError(ms),
): Promise<T> {
  const ac = new AbortController();
  const onParentAbort = () => ac.abort(parent?.reason);
  if (parent?.aborted) ac.abort(parent.reason);
  else parent?.addEventListener('abort', onParentAbort, { once: true });
  // A Node timer holds at most MAX_TIMER_MS (longer ones fire at once): a longer limit is re-armed.
  const endsAt = Date.now() + Math.max(0, ms);
  let timer: NodeJS.Timeout;
  const arm = (left: number) => {
    timer = setTimeout(() => {
      const rest = endsAt - Date.now();
      if (rest > 0) arm(rest);
      else ac.abort(onTimeout());
    }, Math.min(left, MAX_TIMER_MS));
  };
  arm(Math.max(0, ms));
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(ac.signal.reason);
    if (ac.signal.aborted) onAbort();
    else ac.signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    const call = fn(ac.signal);
    call.catch(() => {}); // settled after the abort won the race: already reported
    return await Promise.race([call, aborted]);
  } finally {
    clearTimeout(timer!);
    parent?.removeEventListener('abort', onParentAbort);
    if (onAbort) ac.signal.removeEventListener('abort', onAbort);
  }
}

/**
 * Runs fn bounded by an absolute deadline (epoch ms): rejects with a
 * DeadlineError when it passes (at once if it already has), or with the
 * parent's reason when the parent aborts.
 */
export function withDeadline<T>(
  deadlineAt: number, parent: AbortSignal | undefined, fn: (signal: AbortSignal) => Promise<T>, now: () => number = Date.now,
): Promise<T> {
  const left = deadlineAt - now();
  if (left <= 0) return Promise.reject(new DeadlineError(deadlineAt));
  return withTimeout(left, parent, fn, () => new DeadlineError(deadlineAt));
}

/** Whether err is the timeout of a withTimeout call (not the parent's abort). */
export function isTimeout(err: unknown): err is TimeoutError {
  return err instanceof TimeoutError;
}
