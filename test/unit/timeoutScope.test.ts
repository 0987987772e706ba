/**
 * Bounded calls (src/core/timeout.ts): a call that settles in the turn of the event loop it started in arms no
 * timer and no abort listener; one that outlives its turn is bounded by its limit counted from its start, and by
 * its parent's abort, whenever that comes.
 */
import { describe, expect, it } from 'vitest';
import {
  DeadlineError,
  TimeoutError,
  withDeadlineScope,
  withScopeSignal,
  withTimeoutScope,
  type CallScope,
} from '../../src/core/timeout.js';

const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
const never = () => new Promise<never>(() => {});

/** A parent signal that counts the listeners added to it. */
function countedParent(): { ac: AbortController; added: () => number } {
  const ac = new AbortController();
  let added = 0;
  const add = ac.signal.addEventListener.bind(ac.signal);
  ac.signal.addEventListener = ((...args: Parameters<AbortSignal['addEventListener']>) => {
    added++;
    add(...args);
  }) as AbortSignal['addEventListener'];
  return { ac, added: () => added };
}

describe('withTimeoutScope', () => {
  it('a call that answers in its own turn arms no timer and adds no listener to its parent', async () => {
    const before = timers();
    const parent = countedParent();
    let during = -1;
    const answer = await withTimeoutScope(60_000, parent.ac.signal, async () => {
      during = timers();
      return 'answered';
    });
    expect(answer).toBe('answered');
    expect(during).toBe(before);
    // Past the turn: nothing was armed for it afterwards either.
    await new Promise((r) => setImmediate(r));
    expect(parent.added()).toBe(0);
    expect(timers()).toBe(before);
  });

  it('a call that outlives its turn times out by its limit counted from its start, its signal aborted', async () => {
    let signal: AbortSignal | undefined;
    const started = Date.now();
    const p = withTimeoutScope(30, undefined, (scope) => {
      signal = scope.signal;
      return never();
    });
    await expect(p).rejects.toBeInstanceOf(TimeoutError);
    expect(Date.now() - started).toBeGreaterThanOrEqual(29);
    expect(signal?.aborted).toBe(true);
    expect(signal?.reason).toBeInstanceOf(TimeoutError);
  });

  it("a parent aborted before the call is armed, or after, rejects it with the parent's reason", async () => {
    const early = new AbortController();
    const p1 = withTimeoutScope(60_000, early.signal, never);
    early.abort(new Error('early stop'));
    await expect(p1).rejects.toThrow('early stop');

    const late = countedParent();
    const p2 = withTimeoutScope(60_000, late.ac.signal, never);
    await new Promise((r) => setImmediate(r));
    expect(late.added()).toBe(1);
    late.ac.abort(new Error('late stop'));
    await expect(p2).rejects.toThrow('late stop');
  });

  it('a signal read after the abort is already aborted; one read after an answer is not', async () => {
    let scopeOf: { signal: AbortSignal } | undefined;
    const parent = new AbortController();
    parent.abort(new Error('gone'));
    await expect(
      withTimeoutScope(1000, parent.signal, (scope) => {
        scopeOf = scope;
        return never();
      }),
    ).rejects.toThrow('gone');
    // fn is not called for a parent aborted before the call.
    expect(scopeOf).toBeUndefined();
    await withTimeoutScope(1000, undefined, async (scope) => {
      scopeOf = scope;
    });
    expect(scopeOf!.signal.aborted).toBe(false);
  });

  it('a callee that throws at once rejects with its error; a deadline already passed rejects before the call', async () => {
    await expect(
      withTimeoutScope(1000, undefined, () => {
        throw new Error('sync failure');
      }),
    ).rejects.toThrow('sync failure');
    let called = false;
    const passed = withDeadlineScope(Date.now() - 1, undefined, async () => {
      called = true;
    });
    await expect(passed).rejects.toBeInstanceOf(DeadlineError);
    expect(called).toBe(false);
  });
});

describe('withScopeSignal', () => {
  /** A scope that counts how often its signal is asked for. */
  function countedScope(): CallScope & { reads: number } {
    const ac = new AbortController();
    return {
      reads: 0,
      get signal() {
        this.reads++;
        return ac.signal;
      },
    };
  }

  it("asks the scope for its signal only when the object's signal is read, each object its own scope", () => {
    const [a, b] = [countedScope(), countedScope()];
    const x = withScopeSignal({ runId: 'r1' }, a);
    const y = withScopeSignal({ runId: 'r2' }, b);
    expect(a.reads + b.reads).toBe(0);
    expect(x.signal).toBeInstanceOf(AbortSignal);
    expect(a.reads).toBe(1);
    expect(b.reads).toBe(0);
    expect(y.signal).not.toBe(x.signal);
  });

  it('reads like a data property: enumerable, copied by a spread, the scope itself hidden', () => {
    const scope = countedScope();
    const o = withScopeSignal({ runId: 'r1', step: 3 }, scope);
    expect(Object.keys(o)).toEqual(['runId', 'step', 'signal']);
    const copy = { ...o };
    expect(copy.signal).toBe(o.signal);
    expect(Object.getOwnPropertyDescriptor(copy, 'signal')?.get).toBeUndefined();
    expect(JSON.stringify(o)).toBe('{"runId":"r1","step":3,"signal":{}}');
  });
});
