/**
 * The one timeout for outbound calls (tools, model, lookups).
 *
 * On Node 20, `AbortSignal.any([signal, AbortSignal.timeout(ms)])` can be
 * garbage-collected before it fires: the timeout signal is held only weakly by
 * the combined one, so a GC during the wait leaves a request that never ends.
 * Here the timer is an explicit `setTimeout`, referenced while the call runs
 * (it holds the controller) and cleared when the call settles; a call that
 * settles in the turn of the event loop it started in never needs one
 * (armLater). The call's promise rejects when the signal aborts, so a callee
 * that ignores its signal still yields within the timeout. A leaf module:
 * anything may import it.
 * Decision record 0009: docs/decisions/0009-timeouts-always-fire.md.
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

const SCOPE = Symbol('callScope');

/** One accessor for every object withScopeSignal makes: the same getter, read from the object's own scope. */
const SCOPE_SIGNAL: PropertyDescriptor & ThisType<{ [SCOPE]: CallScope }> = {
  get() {
    return this[SCOPE].signal;
  },
  enumerable: true,
  configurable: true,
};

/**
 * `o` with a `signal` property that reads the scope's signal when read (so the callee that never reads it never makes
 * one), enumerable like a data property: a spread copies the signal.
 *
 * Not an object literal with `get signal() { return scope.signal; }`: V8 gives every such object a hidden class of its
 * own that holds that object's getter, and those hidden classes live in the old generation until a full collection.
 * Through the getter's closure they held everything of the step that made the call (its state, its job, its model
 * call), so every step's objects outlived the young generation: about 3.5 KB a step copied and promoted, and most of
 * the worker's garbage-collection time (`node dist/bench/gcTrace.js engine`). One getter shared by every object keeps
 * one hidden class, and a step's objects die young.
 */
export function withScopeSignal<T extends object>(o: T, scope: CallScope): T & CallScope {
  Object.defineProperty(o, SCOPE, { value: scope });
  return Object.defineProperty(o, 'signal', SCOPE_SIGNAL) as T & CallScope;
}

/**
 * What `p` resolves to, or `late` when it has not resolved within `ms`: a bounded wait on something that can hang (a
 * connection reconnecting to a Redis that is away). The timer does not keep the process alive and is cleared when
 * `p` resolves first; `p` must not reject (map its rejection to a value first).
 */
export async function resultWithin<T>(p: Promise<T>, ms: number, late: T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const gaveUp = new Promise<T>((resolve) => {
    timer = setTimeout(() => resolve(late), ms).unref();
  });
  try {
    return await Promise.race([p, gaveUp]);
  } finally {
    clearTimeout(timer);
  }
}

/** Whether `p` settles (resolves or rejects) within `ms`: so a stopping process waits for a close() a bounded time. */
export function settledWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  return resultWithin(
    p.then(
      () => true,
      () => true,
    ),
    ms,
    false,
  );
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
export function withTimeoutScope<T>(
  ms: number,
  parent: AbortSignal | undefined,
  fn: (scope: CallScope) => Promise<T>,
  onTimeout: () => Error = () => new TimeoutError(ms),
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    // Rejected with whatever the callee or the parent gave (an Error everywhere in this code base).
    const fail = reject as (reason: unknown) => void;
    const call = new BoundedCall(Date.now() + Math.max(0, ms), parent, onTimeout, fail);
    if (parent?.aborted) return call.abort(parent.reason);
    let answer: Promise<T>;
    try {
      answer = Promise.resolve(fn(call));
    } catch (err) {
      call.settle();
      return fail(err);
    }
    answer.then(
      (value) => {
        if (call.settle()) resolve(value);
      },
      (err: unknown) => {
        if (call.settle()) fail(err);
      },
    );
    armLater(call);
  });
}

/**
 * Calls started in this turn of the event loop whose timer and parent listener are not armed yet. Most
 * bounded calls of a step (a scripted model, a tool that reads its input) settle in the turn they start in;
 * arming a timer and an abort listener for each and removing them again was a tenth of what a read-only step
 * allocated. The calls still pending once the turn's I/O is handled are armed then (one setImmediate for all),
 * for the time left of their limit, which counts from the call's start; a parent aborted meanwhile rejects
 * them then. A call that outlives its turn is bounded as an eagerly armed one is.
 */
let unarmed: BoundedCall[] = [];

function armLater(call: BoundedCall): void {
  if (unarmed.length === 0) setImmediate(armPending);
  unarmed.push(call);
}

function armPending(): void {
  const calls = unarmed;
  unarmed = [];
  for (const call of calls) call.arm();
}

/** One bounded call: its signal (created on first read), and once armed its timer and its parent's listener. */
class BoundedCall implements CallScope {
  private ac: AbortController | undefined;
  private settled = false;
  private aborted = false;
  private why: unknown;
  private timer: NodeJS.Timeout | undefined;
  private onParentAbort: (() => void) | undefined;

  constructor(
    private readonly endsAt: number,
    private readonly parent: AbortSignal | undefined,
    private readonly onTimeout: () => Error,
    private readonly reject: (reason: unknown) => void,
  ) {}

  get signal(): AbortSignal {
    if (!this.ac) {
      this.ac = new AbortController();
      if (this.aborted) this.ac.abort(this.why);
    }
    return this.ac.signal;
  }

  /** Aborted (the parent's reason, or the timeout): the call rejects at once, whatever fn does with its signal. */
  abort(reason: unknown): void {
    if (this.settled) return;
    this.settled = true;
    this.aborted = true;
    this.why = reason;
    this.disarm();
    this.ac?.abort(reason);
    this.reject(reason);
  }

  /** fn settled: false when an abort already decided the outcome. */
  settle(): boolean {
    if (this.settled) return false;
    this.settled = true;
    this.disarm();
    return true;
  }

  arm(): void {
    if (this.settled) return;
    const { parent } = this;
    if (parent?.aborted) return this.abort(parent.reason);
    if (parent) {
      this.onParentAbort = () => this.abort(parent.reason);
      parent.addEventListener('abort', this.onParentAbort, { once: true });
    }
    this.armTimer();
  }

  /** A Node timer holds at most MAX_TIMER_MS (longer ones fire at once): a longer limit is re-armed. */
  private armTimer(): void {
    const left = this.endsAt - Date.now();
    if (left <= 0) return this.abort(this.onTimeout());
    this.timer = setTimeout(() => this.armTimer(), Math.min(left, MAX_TIMER_MS));
  }

  private disarm(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    if (this.onParentAbort) this.parent?.removeEventListener('abort', this.onParentAbort);
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
