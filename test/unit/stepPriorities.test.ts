/**
 * The step order's priorities (src/flow/stepPriority.ts): the lowest level (a load under two runs a unit of weight)
 * is the wait list (0), each level above it the prioritized set at that level less one, so the order BullMQ serves
 * (the wait list, then the lowest priority) is the levels' own, whoever else is at work.
 */
import { describe, expect, it } from 'vitest';
import { StepPriorities, stepPriority } from '../../src/flow/stepPriority.js';

const shares = (counts: Record<string, number>, settings: Record<string, string> = {}) => ({
  counts: Object.fromEntries(Object.entries(counts).map(([t, n]) => [`t:${t}`, String(n)])),
  settings,
});

describe('StepPriorities', () => {
  it('puts the lowest level on the wait list and every level above it in the prioritized set', () => {
    const p = new StepPriorities({});
    expect(p.of('a')).toBe(0); // nothing read yet: the lowest level
    p.update(shares({ light: 1, mid: 4, heavy: 40, gone: 0 }));
    expect([stepPriority(1, 1), stepPriority(4, 1), stepPriority(40, 1)]).toEqual([1, 3, 6]);
    expect([p.of('light'), p.of('mid'), p.of('heavy'), p.of('gone')]).toEqual([0, 2, 5, 0]);
  });

  it('keeps a heavy tenant prioritized when it is alone, so a tenant arriving below it goes first at once', () => {
    const p = new StepPriorities({});
    p.update(shares({ heavy: 40 }));
    expect(p.of('heavy')).toBe(5);
    p.note('light', 1, 1); // an admission's fresh count
    expect([p.of('light'), p.of('heavy')]).toEqual([0, 5]);
  });

  it("weighs the tenants' loads (a weight set at run time over the configured one)", () => {
    const p = new StepPriorities({ big: 8 });
    p.update(shares({ big: 16, small: 2, tuned: 16 }, { 'w:tuned': '16' }));
    // big 16/8 = 2 -> level 2; small 2 -> 2; tuned 16/16 = 1 -> 1
    expect([p.of('tuned'), p.of('big'), p.of('small')]).toEqual([0, 1, 1]);
  });
});
