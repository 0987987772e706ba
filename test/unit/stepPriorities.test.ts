/**
 * The step order's priorities (src/flow/stepPriority.ts): a tenant's level against the least loaded tenant at work.
 * The lowest level is the wait list (0), the others' levels above it their BullMQ priorities, so the order BullMQ
 * serves (the wait list, then the lowest priority) is the levels' own.
 */
import { describe, expect, it } from 'vitest';
import { StepPriorities, stepPriority } from '../../src/flow/stepPriority.js';

const shares = (counts: Record<string, number>, settings: Record<string, string> = {}) => ({
  counts: Object.fromEntries(Object.entries(counts).map(([t, n]) => [`t:${t}`, String(n)])),
  settings,
});

describe('StepPriorities', () => {
  it('puts every step job on the wait list while every tenant at work is at one level', () => {
    const p = new StepPriorities({});
    expect(p.of('a')).toBe(0); // nothing read yet
    p.update(shares({ a: 20 }));
    expect(stepPriority(20, 1)).toBe(5);
    expect(p.of('a')).toBe(0);
    p.update(shares({ a: 20, b: 30 })); // within a factor of two: one level
    expect([p.of('a'), p.of('b')]).toEqual([0, 0]);
  });

  it('gives the more loaded tenants their levels above the lowest, in the order of their loads', () => {
    const p = new StepPriorities({});
    p.update(shares({ light: 1, mid: 4, heavy: 40, gone: 0 }));
    // light 1, mid 3, heavy 6; a tenant with no run at work does not set the lowest level
    expect([p.of('light'), p.of('mid'), p.of('heavy'), p.of('gone')]).toEqual([0, 2, 5, 0]);
    p.update(shares({ mid: 4, heavy: 40 })); // light's runs ended: mid is the lowest now
    expect([p.of('light'), p.of('mid'), p.of('heavy')]).toEqual([0, 0, 3]);
  });

  it("weighs the tenants' loads (a weight set at run time over the configured one)", () => {
    const p = new StepPriorities({ big: 8 });
    p.update(shares({ big: 16, small: 2, tuned: 16 }, { 'w:tuned': '16' }));
    // big 16/8 = 2 -> level 2; small 2 -> 2; tuned 16/16 = 1 -> 1
    expect([p.of('tuned'), p.of('big'), p.of('small')]).toEqual([0, 1, 1]);
  });

  it("takes an admission's fresh count at once, a tenant below the lowest level putting the others behind it", () => {
    const p = new StepPriorities({});
    p.update(shares({ heavy: 40 }));
    expect(p.of('heavy')).toBe(0);
    p.note('light', 1, 1);
    expect([p.of('light'), p.of('heavy')]).toEqual([0, 5]);
    p.note('light', 10, 1); // the count the next sweep replaces
    expect(p.of('light')).toBe(3);
  });
});
