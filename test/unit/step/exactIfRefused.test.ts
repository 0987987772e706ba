/**
 * exactIfRefused without Redis: a check that answers at once is answered at once (the model stage calls it at every
 * attempt), a stop of the byte bound is asked again of the exact count, an async check stays async.
 */
import { describe, expect, it } from 'vitest';
import type { BudgetStop } from '../../../src/budget/policy.js';
import { exactIfRefused, type Estimate } from '../../../src/worker/step/prompt.js';

const tokensStop: BudgetStop = { kind: 'tokens', reason: 'tokens: over the run budget' };
const overAt = (limit: number) => (tokens: number) => (tokens > limit ? tokensStop : undefined);

describe('exactIfRefused', () => {
  it('answers a check that answers at once without a promise, and never counts exactly', () => {
    let counted = 0;
    const estimate: Estimate = { tokens: 100, exact: () => Promise.resolve(++counted) };
    const answer = exactIfRefused(estimate, overAt(1_000));
    expect(answer).toBeUndefined();
    expect(counted).toBe(0);
    expect(estimate.exact).toBeDefined();
  });

  it('asks a refusal of the byte bound again of the exact count, which replaces the bound', async () => {
    const estimate: Estimate = { tokens: 2_000, exact: () => Promise.resolve(500) };
    const answer = exactIfRefused(estimate, overAt(1_000));
    expect(answer).toBeInstanceOf(Promise);
    expect(await answer).toBeUndefined();
    expect(estimate).toEqual({ tokens: 500, exact: undefined });
  });

  it('keeps a refusal the exact count confirms, and one that is not about tokens without counting', async () => {
    const estimate: Estimate = { tokens: 2_000, exact: () => Promise.resolve(1_500) };
    expect(await exactIfRefused(estimate, overAt(1_000))).toBe(tokensStop);
    const steps: BudgetStop = { kind: 'steps', reason: 'steps' };
    const untouched: Estimate = { tokens: 2_000, exact: () => Promise.reject(new Error('not counted')) };
    expect(exactIfRefused(untouched, () => steps)).toBe(steps);
  });

  it('keeps the bound when the exact count fails', async () => {
    const estimate: Estimate = { tokens: 2_000, exact: () => Promise.reject(new Error('store away')) };
    await expect(exactIfRefused(estimate, overAt(1_000))).rejects.toThrow('store away');
    expect(estimate.tokens).toBe(2_000);
    expect(estimate.exact).toBeDefined();
  });

  it('waits for an async check, and rechecks its refusal on the exact count', async () => {
    const estimate: Estimate = { tokens: 2_000, exact: () => Promise.resolve(10) };
    const seen: number[] = [];
    const check = (tokens: number) => {
      seen.push(tokens);
      return Promise.resolve(tokens > 1_000 ? { kind: 'tenant_tokens' as const, reason: 'day' } : undefined);
    };
    expect(await exactIfRefused(estimate, check)).toBeUndefined();
    expect(seen).toEqual([2_000, 10]);
  });
});
