/**
 * Prices and costs (src/core/prices.ts): each provider's usage shape costed exactly against hand-computed values
 * (integer µ$, rounded up once per attempt), the estimate an upper bound, versions by time, and a child's money
 * carved out of its parent's like its tokens.
 */
import { describe, expect, it } from 'vitest';
import { costOf, estimateCost, formatMicros, PriceTable } from '../../src/core/prices.js';
import { usageOf } from '../../src/models/aiSdk.js';
import { carveLimits } from '../../src/runs/children.js';
import { costCheck } from '../../src/budget/policy.js';
import { loadConfig } from '../../src/config/config.js';

const table = new PriceTable();
const at = Date.parse('2026-12-05T00:00:00Z');

describe('costOf', () => {
  it('OpenAI gpt-4o-mini: cached input inside prompt tokens, at its own price', () => {
    const p = table.priceAt('openai', 'gpt-4o-mini', at)!;
    // 600 × $0.15 + 400 × $0.075 + 200 × $0.60 per Mtok = 90 + 30 + 120 µ$.
    expect(costOf({ promptTokens: 1000, completionTokens: 200, cachedInputTokens: 400 }, p)).toBe(240);
    // No cache: 1000 × 0.15 + 200 × 0.6 = 270 µ$.
    expect(costOf({ promptTokens: 1000, completionTokens: 200 }, p)).toBe(270);
  });

  it('Anthropic claude-sonnet-4-5: cache reads and cache writes each at their price', () => {
    const p = table.priceAt('anthropic', 'claude-sonnet-4-5', at)!;
    // 300 × $3 + 500 × $0.30 + 200 × $3.75 + 100 × $15 per Mtok = 900 + 150 + 750 + 1500 µ$.
    expect(
      costOf({ promptTokens: 1000, completionTokens: 100, cachedInputTokens: 500, cacheWriteTokens: 200 }, p),
    ).toBe(3300);
  });

  it('the scripted model at its nominal price; a fraction of a µ$ rounds up, once per attempt', () => {
    const p = table.priceAt('scripted', 'scripted', at)!;
    expect(costOf({ promptTokens: 100, completionTokens: 10 }, p)).toBe(120);
    // 1 token at $0.15 / Mtok is 0.15 µ$: charged 1 µ$, never 0.
    expect(costOf({ promptTokens: 1, completionTokens: 0 }, table.priceAt('openai', 'gpt-4o-mini', at)!)).toBe(1);
    expect(costOf({ promptTokens: 0, completionTokens: 0 }, p)).toBe(0);
  });

  it('exact for counts whose products pass 2^53 (BigInt)', () => {
    const p = table.priceAt('anthropic', 'claude-sonnet-4-5', at)!;
    // 1e9 output tokens × 15,000,000 µ$/Mtok = 1.5e16 pico-µ$... = 15,000,000,000 µ$ exactly.
    expect(costOf({ promptTokens: 0, completionTokens: 1_000_000_000 }, p)).toBe(15_000_000_000);
  });

  it('an inconsistent report never bills a token twice: cached and written are capped at the input', () => {
    const p = table.priceAt('anthropic', 'claude-sonnet-4-5', at)!;
    // All 10 input tokens cached (at $0.30): 3 µ$; the 50 "written" have nothing left to be.
    expect(costOf({ promptTokens: 10, completionTokens: 0, cachedInputTokens: 10, cacheWriteTokens: 50 }, p)).toBe(3);
  });

  it('the estimate prices every input token at the dearest input price and the whole completion cap', () => {
    const p = table.priceAt('anthropic', 'claude-sonnet-4-5', at)!;
    // 1000 × $3.75 + 1024 × $15 = 3750 + 15360 µ$.
    expect(estimateCost(1000, 1024, p)).toBe(19_110);
    expect(estimateCost(1000, 1024, p)).toBeGreaterThanOrEqual(
      costOf({ promptTokens: 1000, completionTokens: 1024, cacheWriteTokens: 1000 }, p),
    );
  });

  it('formats µ$ as dollars', () => {
    expect(formatMicros(3300)).toBe('0.003300');
    expect(formatMicros(12_000_001)).toBe('12.000001');
  });
});

describe('usageOf (the AI SDK v6 usage)', () => {
  it('keeps cache reads and writes apart, inside the input total', () => {
    expect(
      usageOf({
        inputTokens: 1000,
        outputTokens: 100,
        totalTokens: 1100,
        inputTokenDetails: { noCacheTokens: 300, cacheReadTokens: 500, cacheWriteTokens: 200 },
        outputTokenDetails: { textTokens: 100, reasoningTokens: undefined },
      }),
    ).toEqual({ promptTokens: 1000, completionTokens: 100, cachedInputTokens: 500, cacheWriteTokens: 200 });
    expect(usageOf(undefined)).toBeUndefined();
  });
});

describe('price versions', () => {
  const change = '2027-01-01T00:00:00Z';
  const versioned = new PriceTable(undefined, [
    { provider: 'openai', model: 'gpt-4o-mini', from: change, input: 300_000, output: 1_200_000 },
  ]);

  it('a change applies from its time on; earlier attempts keep the price they were charged at', () => {
    const before = versioned.priceAt('openai', 'gpt-4o-mini', Date.parse(change) - 1)!;
    const after = versioned.priceAt('openai', 'gpt-4o-mini', Date.parse(change))!;
    expect(before.input).toBe(150_000);
    expect(after.input).toBe(300_000);
    expect(after.version).toMatch(/^openai\/gpt-4o-mini@2027-01-01T00:00:00.000Z#[0-9a-f]{8}$/);
    expect(before.version).not.toBe(after.version);
  });

  it('an override without `from` replaces the default; `model` omitted prices every model of the provider', () => {
    const t = new PriceTable(undefined, [
      { provider: 'openai', model: 'gpt-4o-mini', input: 1, output: 2 },
      { provider: 'vllm', input: 10, output: 20 },
    ]);
    expect(t.priceAt('openai', 'gpt-4o-mini', at)!.input).toBe(1);
    expect(t.priceAt('vllm', 'llama3.1:8b', at)!.output).toBe(20);
    expect(t.priceAt('openai', 'o9-unknown', at)).toBeUndefined();
  });
});

describe('MODEL_PRICES and the money limits in the configuration', () => {
  it('a bad price entry is refused naming its field', () => {
    expect(() => loadConfig({ MODEL_PRICES: JSON.stringify([{ provider: 'openai', input: -1, output: 1 }]) })).toThrow(
      /MODEL_PRICES\.0\.input/,
    );
    expect(() => loadConfig({ MODEL_PRICES: JSON.stringify([{ provider: 'openai', output: 1 }]) })).toThrow(
      /MODEL_PRICES\.0\.input/,
    );
  });

  it('a default money budget above the ceiling is refused', () => {
    expect(() => loadConfig({ DEFAULT_MAX_COST: '2000', LIMIT_MAX_COST: '1000' })).toThrow(/DEFAULT_MAX_COST/);
  });
});

describe('the run money budget', () => {
  const spec = (maxCost?: number) => ({
    limits: { maxSteps: 10, maxTokens: 1000, maxWallMs: 1, deadlineAt: 1, ...(maxCost ? { maxCost } : {}) },
    createdAt: 0,
  });

  it('an attempt whose estimate would cross maxCost is refused, naming the cost', () => {
    expect(costCheck(spec(1000), 600, 400)).toBeUndefined();
    expect(costCheck(spec(1000), 600, 401)).toEqual({
      kind: 'cost',
      reason: 'cost: used 600 + estimate 401 > cap 1000 µ$',
    });
    expect(costCheck(spec(), 1e12, 1e12)).toBeUndefined();
  });

  it("a child's money is a share of what the parent has left, never more than it asks", () => {
    const now = 1000;
    const parent = { maxSteps: 10, maxTokens: 1200, deadlineAt: now + 60_000, maxCost: 10_000 };
    expect(carveLimits(parent, { steps: 2, tokens: 200, cost: 4000 }, undefined, now)?.maxCost).toBe(6000);
    expect(carveLimits(parent, { steps: 2, tokens: 200, cost: 4000 }, undefined, now, 4)?.maxCost).toBe(1500);
    expect(carveLimits(parent, { steps: 2, tokens: 200, cost: 4000 }, { maxCost: 500 }, now)?.maxCost).toBe(500);
    // Nothing left to give: no child.
    expect(carveLimits(parent, { steps: 2, tokens: 200, cost: 10_000 }, undefined, now)).toBeUndefined();
    // A parent without a money budget gives none.
    expect(
      carveLimits({ ...parent, maxCost: undefined }, { steps: 2, tokens: 200 }, undefined, now),
    ).not.toHaveProperty('maxCost');
  });
});
