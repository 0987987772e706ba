/** The retry's rules without Redis (src/runs/retryRun.ts planRetry): statuses, reasons, extensions, limits. */
import { describe, expect, it } from 'vitest';
import { planRetry } from '../../src/runs/retryRun.js';

const now = 1_800_000_000_000;
const old = { maxSteps: 5, maxTokens: 1000, maxWallMs: 60_000, deadlineAt: now - 10_000 };
const ceilings = {
  LIMIT_MAX_STEPS: 200,
  LIMIT_MAX_TOKENS: 5_000_000,
  LIMIT_MAX_WALL_MS: 24 * 3600_000,
  LIMIT_MAX_COST: 0,
};
const plan = (status: string, reason: string, ext = {}) => planRetry({ status, reason }, old, ext, now, ceilings);

describe('planRetry', () => {
  it('only failed, budget_exceeded and needs_human runs go on', () => {
    for (const s of ['queued', 'running', 'waiting_approval', 'completed', 'cancelled'])
      expect(plan(s, '')).toEqual({ ok: false, code: 'not_retryable', status: s });
    expect(plan('failed', 'step_error: step_error').ok).toBe(true);
    expect(plan('needs_human', 'provider_unavailable: openai').ok).toBe(true);
  });

  it('refuses what a retry cannot change: a pinned version, an expired approval', () => {
    expect(plan('needs_human', 'version_mismatch: run pinned a, worker has b')).toMatchObject({
      ok: false,
      code: 'version_mismatch',
    });
    expect(plan('failed', 'approval_expired')).toMatchObject({ ok: false, code: 'approval_expired' });
  });

  it('a budget stop needs more of the budget that stopped it', () => {
    expect(plan('budget_exceeded', 'steps: 5 of 5 used')).toEqual({
      ok: false,
      code: 'extension_required',
      budget: 'steps',
    });
    expect(plan('budget_exceeded', 'steps: 5 of 5 used', { tokens: 10 })).toMatchObject({
      code: 'extension_required',
      budget: 'steps',
    });
    expect(plan('budget_exceeded', 'tokens: used 990 + estimate 50 > cap 1000', { tokens: 100 })).toMatchObject({
      ok: true,
      limits: { maxTokens: 1100 },
    });
    expect(plan('budget_exceeded', 'wall_clock: deadline passed', { steps: 1 })).toMatchObject({
      code: 'extension_required',
      budget: 'wall_clock',
    });
    // The tenant's day is not the run's budget: no extension of it exists (checked against Redis instead).
    expect(plan('budget_exceeded', 'tenant_tokens: acme used 10 + estimate 5 > 12 tokens today').ok).toBe(true);
  });

  it('wall clock: from now when the deadline has passed, from the deadline when it is ahead; maxWallMs adds up', () => {
    const passed = plan('budget_exceeded', 'wall_clock: deadline passed', { wallMs: 5000 });
    expect(passed).toMatchObject({ ok: true, limits: { deadlineAt: now + 5000, maxWallMs: 65_000 } });
    const ahead = planRetry(
      { status: 'failed', reason: 'x' },
      { ...old, deadlineAt: now + 1000 },
      { wallMs: 5000 },
      now,
      ceilings,
    );
    expect(ahead).toMatchObject({ ok: true, limits: { deadlineAt: now + 6000 } });
    expect(plan('failed', 'x')).toMatchObject({
      ok: true,
      limits: old,
      extension: { steps: 0, tokens: 0, wallMs: 0, cost: 0 },
    });
  });

  it("totals past the deployment's limits name the field", () => {
    expect(plan('failed', 'x', { steps: 196 })).toEqual({ ok: false, code: 'over_limit', field: 'steps', limit: 200 });
    expect(plan('failed', 'x', { steps: 195 }).ok).toBe(true);
    expect(plan('failed', 'x', { tokens: 5_000_000 })).toMatchObject({ code: 'over_limit', field: 'tokens' });
    expect(plan('failed', 'x', { wallMs: 24 * 3600_000 })).toMatchObject({ code: 'over_limit', field: 'wallMs' });
  });

  it("money: the run's own cap stopped it, a retry needs more of it; a tenant's limit did, none; no cap, none to raise", () => {
    const priced = { ...old, maxCost: 3000 };
    const costPlan = (reason: string, ext = {}, c = ceilings) =>
      planRetry({ status: 'budget_exceeded', reason }, priced, ext, now, c);
    const own = 'cost: used 2400 + estimate 900 > cap 3000 µ$';
    expect(costPlan(own)).toEqual({ ok: false, code: 'extension_required', budget: 'cost' });
    expect(costPlan(own, { cost: 2000 })).toMatchObject({
      ok: true,
      limits: { maxCost: 5000, maxSteps: 5 },
      extension: { cost: 2000 },
    });
    expect(costPlan(own, { cost: 2001 }, { ...ceilings, LIMIT_MAX_COST: 5000 })).toEqual({
      ok: false,
      code: 'over_limit',
      field: 'cost',
      limit: 5000,
    });
    // The tenant's money day is not the run's budget: nothing of the run to raise.
    expect(costPlan('cost: acme (tenant today) used 80000 + estimate 20480 > 100000 µ$')).toMatchObject({ ok: true });
    expect(plan('failed', 'x', { cost: 100 })).toEqual({ ok: false, code: 'no_money_budget' });
    expect(plan('failed', 'x')).toMatchObject({ ok: true, extension: { cost: 0 } });
  });
});
