/** The step policy, with no Redis: budget checks before and after each attempt, and the status a step commits. */
import { describe, expect, it } from 'vitest';
import { LIMIT_FIELDS, limitsOfBudget, limitsSchema } from '../../src/runs/spec.js';
import {
  attemptCheck,
  estimateCallTokens,
  nextStatus,
  preflight,
  spentCheck,
  wallClockStop,
  type Budgeted,
  type RunUsage,
} from '../../src/budget/policy.js';

const createdAt = Date.UTC(2026, 0, 1);
const spec: Budgeted = {
  createdAt,
  limits: { maxSteps: 5, maxTokens: 1000, maxWallMs: 60_000, deadlineAt: createdAt + 60_000 },
};
const used = (steps: number, tokens: number): RunUsage => ({ steps, tokens, contextBytes: 0 });
const t = createdAt + 1000;

describe('estimateCallTokens', () => {
  it('the transcript so far + the input and instructions + the completion cap', () => {
    expect(estimateCallTokens(300, 50, 100)).toBe(450);
  });
});

describe('preflight and attemptCheck', () => {
  it('no step left: stopped on steps before anything else', () => {
    expect(preflight(spec, used(5, 0), 1, t)).toEqual({ kind: 'steps', reason: 'steps: 5 of 5 used' });
  });

  it('an attempt that could exceed the cap is not made; one that fits exactly is', () => {
    expect(preflight(spec, used(1, 600), 400, t)).toBeUndefined();
    expect(preflight(spec, used(1, 600), 401, t)).toEqual({
      kind: 'tokens',
      reason: 'tokens: used 600 + estimate 401 > cap 1000',
    });
    expect(attemptCheck(spec, 999, 2, t)?.kind).toBe('tokens');
  });

  it('past the deadline: stopped on the wall clock, whatever the tokens', () => {
    const stop = attemptCheck(spec, 0, 0, spec.limits.deadlineAt);
    expect(stop?.kind).toBe('wall_clock');
    expect(stop?.reason).toBe('wall_clock: deadline 2026-01-01T00:01:00.000Z passed (60000 ms of 60000 used)');
  });
});

describe('spentCheck', () => {
  it('at the cap goes on (the next pre-flight stops it); past it stops', () => {
    expect(spentCheck(spec, 1000)).toBeUndefined();
    expect(spentCheck(spec, 1001)).toEqual({ kind: 'tokens', reason: 'tokens: used 1001 of cap 1000' });
  });
});

describe('wallClockStop', () => {
  it('says whether a retry was cut', () => {
    expect(wallClockStop(spec, t, true).reason).toBe(
      'wall_clock: a retry would wait past the deadline 2026-01-01T00:01:00.000Z (1000 ms of 60000 used)',
    );
  });
});

describe('nextStatus', () => {
  const call = [{ id: 'c1' }];
  it('a final answer with no tool call completes the run', () => {
    expect(nextStatus(spec, used(4, 0), { final: 'done', toolCalls: [] }, undefined)).toEqual({
      status: 'completed',
      reason: 'final_answer',
    });
  });

  it('a final answer with tool calls is not the end', () => {
    expect(nextStatus(spec, used(0, 0), { final: 'done', toolCalls: call }, undefined).status).toBe('running');
  });

  it('the deadline cut the tools short: budget_exceeded on the wall clock', () => {
    const stop = wallClockStop(spec, t);
    expect(nextStatus(spec, used(0, 0), { toolCalls: call }, stop)).toEqual({
      status: 'budget_exceeded',
      reason: stop.reason,
      budget: 'wall_clock',
    });
  });

  it('the last step allowed ends the run; the one before goes on', () => {
    expect(nextStatus(spec, used(4, 0), { toolCalls: call }, undefined)).toEqual({
      status: 'budget_exceeded',
      reason: 'steps: 5 of 5 used',
      budget: 'steps',
    });
    expect(nextStatus(spec, used(3, 0), { toolCalls: call }, undefined)).toEqual({ status: 'running', reason: '' });
  });
});

describe('LIMIT_FIELDS', () => {
  it("names every limit of a run (limitsSchema's keys), so a job rebuilt from the budget hash keeps them all", () => {
    expect([...LIMIT_FIELDS].sort()).toEqual(Object.keys(limitsSchema.shape).sort());
    expect(limitsOfBudget({ maxSteps: 3, maxTokens: 10, maxWallMs: 5, deadlineAt: 7, maxCost: 0 })).toEqual({
      maxSteps: 3,
      maxTokens: 10,
      maxWallMs: 5,
      deadlineAt: 7,
    });
    expect(limitsOfBudget({ maxSteps: 3, maxTokens: 10, maxWallMs: 5, deadlineAt: 7, maxCost: 9 }).maxCost).toBe(9);
  });
});
