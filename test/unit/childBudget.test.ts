/**
 * A child's limits carved out of its parent's (src/runs/children.ts): never more than the parent has left,
 * the parent's deadline at the latest, what the call asks only lowering them; nothing to give is no child. And
 * when the parent has moved on from a child (took its outcome), so that the child may not go back to work.
 */
import { describe, expect, it } from 'vitest';
import { carveLimits, childEventOf, parentMovedOn, type ParentStanding } from '../../src/runs/children.js';

const now = 1_000_000;
const parent = { maxSteps: 10, maxTokens: 1200, deadlineAt: now + 60_000 };

describe('carveLimits', () => {
  it("gives the parent's tokens left, its steps left after the calling step, its deadline", () => {
    expect(carveLimits(parent, { steps: 2, tokens: 200 }, undefined, now)).toEqual({
      maxSteps: 7,
      maxTokens: 1000,
      deadlineAt: now + 60_000,
    });
  });

  it('a budget asked lowers them and never raises them', () => {
    const asked = { maxSteps: 3, maxTokens: 5000, maxWallMs: 10_000 };
    expect(carveLimits(parent, { steps: 2, tokens: 200 }, asked, now)).toEqual({
      maxSteps: 3,
      maxTokens: 1000,
      deadlineAt: now + 10_000,
    });
    expect(carveLimits(parent, { steps: 0, tokens: 0 }, { maxWallMs: 120_000 }, now)!.deadlineAt).toBe(now + 60_000);
  });

  it('children started together share it: each at most its part, together never more than is left', () => {
    const each = carveLimits(parent, { steps: 2, tokens: 200 }, undefined, now, 3)!;
    expect(each).toEqual({ maxSteps: 2, maxTokens: 333, deadlineAt: now + 60_000 });
    expect(3 * each.maxTokens).toBeLessThanOrEqual(1000);
    expect(3 * each.maxSteps).toBeLessThanOrEqual(7);
    // A share smaller than a step: none of them starts.
    expect(carveLimits(parent, { steps: 2, tokens: 200 }, undefined, now, 8)).toBeUndefined();
  });

  it('nothing left to give: no child', () => {
    expect(carveLimits(parent, { steps: 9, tokens: 0 }, undefined, now)).toBeUndefined();
    expect(carveLimits(parent, { steps: 0, tokens: 1200 }, undefined, now)).toBeUndefined();
    expect(carveLimits(parent, { steps: 0, tokens: 0 }, undefined, now + 60_000)).toBeUndefined();
  });
});

describe('childEventOf', () => {
  it('one event per parent run, step and call, a valid intake key', () => {
    const a = childEventOf('r_' + 'a'.repeat(24), 3, 'call_3_0');
    expect(a).toBe(childEventOf('r_' + 'a'.repeat(24), 3, 'call_3_0'));
    expect(a).not.toBe(childEventOf('r_' + 'a'.repeat(24), 3, 'call_3_1'));
    expect(a).not.toBe(childEventOf('r_' + 'a'.repeat(24), 4, 'call_3_0'));
    expect(a).toMatch(/^child:[0-9a-f]{32}$/);
  });
});

describe('parentMovedOn', () => {
  const child = { runId: 'r_000000000000000000000001', step: 3 };
  const sibling = { runId: 'r_000000000000000000000002', callId: 'c2', tool: 'delegate' };
  const waitingOn = (step: number, children: { runId: string; callId: string; tool: string }[]): ParentStanding => ({
    status: 'waiting_child',
    cursor: step + 1,
    wait: { kind: 'child', at: now, step, children },
  });

  it('the parent still waits on the child: not moved on', () => {
    expect(parentMovedOn(waitingOn(3, [{ runId: child.runId, callId: 'c1', tool: 'delegate' }, sibling]), child)).toBe(
      false,
    );
  });

  it('the step that started the child has not committed (running, or parked mid-step): not moved on', () => {
    expect(parentMovedOn({ status: 'running', cursor: 3, wait: undefined }, child)).toBe(false);
    expect(parentMovedOn({ status: 'needs_human', cursor: 3, wait: undefined }, child)).toBe(false);
  });

  it('woke on it and went on, waits on other children, ended or gone: moved on', () => {
    expect(parentMovedOn({ status: 'running', cursor: 4, wait: undefined }, child)).toBe(true);
    expect(parentMovedOn({ status: 'sleeping', cursor: 5, wait: { kind: 'sleep', at: now } }, child)).toBe(true);
    expect(parentMovedOn({ status: 'needs_human', cursor: 4, wait: undefined }, child)).toBe(true);
    expect(parentMovedOn(waitingOn(5, [sibling]), child)).toBe(true);
    expect(parentMovedOn({ status: 'completed', cursor: 6, wait: undefined }, child)).toBe(true);
    expect(parentMovedOn({ status: 'cancelled', cursor: 3, wait: undefined }, child)).toBe(true);
    expect(parentMovedOn(undefined, child)).toBe(true);
  });
});
