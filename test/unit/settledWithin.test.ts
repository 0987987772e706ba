/** settledWithin and resultWithin (src/core/timeout.ts): a bounded wait for a close() that can hang, which says when it gave up. */
import { describe, expect, it } from 'vitest';
import { resultWithin, settledWithin } from '../../src/core/timeout.js';

describe('settledWithin', () => {
  it('is true when the promise resolves or rejects in time', async () => {
    expect(await settledWithin(Promise.resolve('closed'), 1000)).toBe(true);
    expect(await settledWithin(Promise.reject(new Error('close failed')), 1000)).toBe(true);
  });

  it('is false when the promise has not settled by then, and does not wait for it', async () => {
    const never = new Promise<void>(() => {});
    expect(await settledWithin(never, 20)).toBe(false);
  });

  it('a rejection after it gave up is not left unhandled', async () => {
    let reject: (e: Error) => void = () => {};
    const late = new Promise<void>((_, r) => (reject = r));
    expect(await settledWithin(late, 10)).toBe(false);
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      reject(new Error('closed too late'));
      // Node reports unhandled rejections once the microtasks of this turn have run, before any immediate.
      await new Promise((r) => setImmediate(r));
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
    expect(unhandled).toEqual([]);
  });

  it('resultWithin gives what the promise resolved to, or the late value', async () => {
    expect(await resultWithin(Promise.resolve('master'), 1000, 'late')).toBe('master');
    expect(await resultWithin(new Promise<string>(() => {}), 10, 'late')).toBe('late');
  });
});
