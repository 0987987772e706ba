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
  constructor(
    readonly deadlineAt: number,
    cause?: unknown,
  ) {
    super(
      'deadline',
      `deadline ${new Date(deadlineAt).toISOString()} reached`,
      { deadlineAt },
      cause === undefined ? undefined : { cause },
    );
  }
}

/**
 * A bounded call's abort signal, created on first read: an AbortController costs
 * about 10 µs on Node 20, most of a short in-process call (a scripted model, a
 * tool that reads its input), and a callee that never reads `signal` never pays
 * for it. Once read, it aborts as an eager one would (same reason, same moment).
 */
export interface CallScope {
  readonly signal: AbortSignal;
}

/**
 * Runs fn with a signal that aborts when `parent` aborts (reason: the parent's
 * reason) or after `ms` (reason: onTimeout(), a TimeoutError by default).
 * Rejects with that reason as soon as the signal aborts, whatever fn does with it.
 */
export function withTimeout<T>(
  ms: number,
  parent: AbortSignal | undefined,
  fn: (signal: AbortSignal) => Promise<T>,
  onTimeout: () => Error = () => new TimeoutError(ms),
): Promise<T> {
  return withTimeoutScope(ms, parent, (scope) => fn(scope.signal), onTimeout);
}

/** withTimeout, with the signal created only if fn reads `scope.signal` (CallScope). */
export async function withTimeoutScope<T>(
  ms: number,
  parent: AbortSignal | undefined,
  fn: (scope: CallScope) => Promise<T>,
  onTimeout: () => Error = () => new TimeoutError(ms),
): Promise<T> {
  let ac: AbortController | undefined;
  let fired = false;
  let why: unknown;
  let rejectAborted!: (reason: unknown) => void;
  const aborted = new Promise<never>((_, reject) => (rejectAborted = reject));
  const abort = (reason: unknown) => {
    if (fired) return;
    fired = true;
    why = reason;
    ac?.abort(reason);
    rejectAborted(reason);
  };
  const scope: CallScope = {
    get signal() {
      if (!ac) {
        ac = new AbortController();
        if (fired) ac.abort(why);
      }
      return ac.signal;
    },
  };
  const onParentAbort = () => abort(parent?.reason);
  if (parent?.aborted) abort(parent.reason);
  else parent?.addEventListener('abort', onParentAbort, { once: true });
  // A Node timer holds at most MAX_TIMER_MS (longer ones fire at once): a longer limit is re-armed.
  const endsAt = Date.now() + Math.max(0, ms);
  let timer: NodeJS.Timeout;
  const arm = (left: number) => {
    timer = setTimeout(
      () => {
        const rest = endsAt - Date.now();
        if (rest > 0) arm(rest);
        else abort(onTimeout());
      },
      Math.min(left, MAX_TIMER_MS),
    );
  };
  arm(Math.max(0, ms));
  try {
    if (fired) return await aborted;
    const call = fn(scope);
    call.catch(() => {}); // settled after the abort won the race: already reported
    return await Promise.race([call, aborted]);
  } finally {
    clearTimeout(timer!);
    parent?.removeEventListener('abort', onParentAbort);
  }
}

/**
 * Runs fn bounded by an absolute deadline (epoch ms): rejects with a
 * DeadlineError when it passes (at once if it already has), or with the
 * parent's reason when the parent aborts.
 */
export function withDeadline<T>(
  deadlineAt: number,
  parent: AbortSignal | undefined,
  fn: (signal: AbortSignal) => Promise<T>,
  now: () => number = Date.now,
): Promise<T> {
  return withDeadlineScope(deadlineAt, parent, (scope) => fn(scope.signal), now);
}

/** withDeadline, with the signal created only if fn reads `scope.signal` (CallScope). */
export function withDeadlineScope<T>(
  deadlineAt: number,
  parent: AbortSignal | undefined,
  fn: (scope: CallScope) => Promise<T>,
  now: () => number = Date.now,
): Promise<T> {
  const left = deadlineAt - now();
  if (left <= 0) return Promise.reject(new DeadlineError(deadlineAt));
  return withTimeoutScope(left, parent, fn, () => new DeadlineError(deadlineAt));
}

/** Whether err is the timeout of a withTimeout call (not the parent's abort). */
export function isTimeout(err: unknown): err is TimeoutError {
  return err instanceof TimeoutError;
}
