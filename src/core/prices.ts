/**
 * Model prices and what a model attempt costs, in one currency: US dollars.
 *
 * Prices are integer micro-dollars (µ$, 1e-6 USD) per million tokens, per provider and model, for each kind
 * of token a provider bills: input (not cached), output, cached input (a cache read) and cache write (where
 * the provider bills writing its prompt cache, Anthropic). An attempt's cost is
 *
 *   ceil((plainInput × input + cachedInput × cachedInput + cacheWrite × cacheWrite + output × output) / 1e6) µ$
 *
 * computed in BigInt (exact for any token count), rounded up once per attempt (never below what was spent,
 * at most 1 µ$ above it). Money ledgers hold integer micro-dollars only: no floating point.
 *
 * A price is versioned by the time it takes effect (`from`): an attempt is priced by the newest version
 * in effect when it is made, and its charge records that version, so a change applies to later attempts and
 * never rewrites what was charged. No I/O: the configuration (MODEL_PRICES) validates with priceEntrySchema,
 * the step prices each attempt with PriceTable.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { TokenUsage } from './journal.js';

/** µ$ per million tokens: at most $1,000,000 per million tokens. */
const microsPerMillion = z.number().int().min(0).max(1e12);

/** One price version of a provider's model (MODEL_PRICES entries; `model` omitted: every model of the provider). */
export const priceEntrySchema = z
  .object({
    provider: z.string().min(1).max(63),
    model: z.string().min(1).max(200).optional(),
    /** When this price takes effect (ISO 8601); omitted: always (it replaces a shipped default). */
    from: z.iso.datetime({ offset: true }).optional(),
    input: microsPerMillion,
    output: microsPerMillion,
    /** A cache read; omitted: billed as input. */
    cachedInput: microsPerMillion.optional(),
    /** A cache write; omitted: billed as input. */
    cacheWrite: microsPerMillion.optional(),
  })
  .strict();
export type PriceEntry = z.infer<typeof priceEntrySchema>;

/** A price as it is applied: its per-kind prices and the version a charge records. */
export interface Price {
  input: number;
  output: number;
  cachedInput: number;
  cacheWrite: number;
  /** `<provider>/<model or *>@<from>#<digest of the prices>`: what a charge was priced by. */
  version: string;
}

/**
 * Shipped defaults, list prices in USD at the time of writing (per million tokens): OpenAI gpt-4o-mini $0.15 in,
 * $0.075 cached, $0.60 out; gpt-4o $2.50 / $1.25 / $10; Anthropic claude-sonnet-4-5 $3 in, $0.30 cache read, $3.75
 * cache write (5 minutes), $15 out; claude-haiku-4-5 $1 / $0.10 / $1.25 / $5. The scripted demo model's price is
 * nominal ($1 in, $0.50 cached, $2 out): it costs nothing, and is priced only so money budgets can be tried and
 * tested without a vendor. Override or add with MODEL_PRICES.
 */
export const DEFAULT_PRICES: readonly PriceEntry[] = [
  { provider: 'openai', model: 'gpt-4o-mini', input: 150_000, cachedInput: 75_000, output: 600_000 },
  { provider: 'openai', model: 'gpt-4o', input: 2_500_000, cachedInput: 1_250_000, output: 10_000_000 },
  {
    provider: 'anthropic',
    model: 'claude-sonnet-4-5',
    input: 3_000_000,
    cachedInput: 300_000,
    cacheWrite: 3_750_000,
    output: 15_000_000,
  },
  {
    provider: 'anthropic',
    model: 'claude-haiku-4-5',
    input: 1_000_000,
    cachedInput: 100_000,
    cacheWrite: 1_250_000,
    output: 5_000_000,
  },
  { provider: 'scripted', input: 1_000_000, cachedInput: 500_000, output: 2_000_000 },
];

interface Version {
  fromMs: number;
  price: Price;
}

/** The price versions of every priced model: the shipped defaults, then MODEL_PRICES (later wins at equal `from`). */
export class PriceTable {
  private readonly byModel = new Map<string, Version[]>();

  constructor(entries: readonly PriceEntry[] = DEFAULT_PRICES, overrides: readonly PriceEntry[] = []) {
    for (const e of [...entries, ...overrides]) {
      const key = `${e.provider}/${e.model ?? '*'}`;
      const fromMs = e.from === undefined ? 0 : Date.parse(e.from);
      const list = this.byModel.get(key) ?? [];
      list.push({ fromMs, price: priceOf(key, fromMs, e) });
      // Stable: at an equal `from`, the later entry (an override) comes last and wins.
      list.sort((a, b) => a.fromMs - b.fromMs);
      this.byModel.set(key, list);
    }
  }

  /** The price of `provider`'s `model` in effect at `nowMs` (the model's own, else the provider's `*`), if any. */
  priceAt(provider: string, model: string | undefined, nowMs: number): Price | undefined {
    return (
      latest(this.byModel.get(`${provider}/${model ?? '*'}`), nowMs) ?? latest(this.byModel.get(`${provider}/*`), nowMs)
    );
  }
}

function latest(list: Version[] | undefined, nowMs: number): Price | undefined {
  if (!list) return undefined;
  for (let i = list.length - 1; i >= 0; i--) if (list[i]!.fromMs <= nowMs) return list[i]!.price;
  return undefined;
}

function priceOf(key: string, fromMs: number, e: PriceEntry): Price {
  const input = e.input;
  const cachedInput = e.cachedInput ?? input;
  const cacheWrite = e.cacheWrite ?? input;
  const digest = createHash('sha256')
    .update(`${input}/${e.output}/${cachedInput}/${cacheWrite}`)
    .digest('hex')
    .slice(0, 8);
  return {
    input,
    output: e.output,
    cachedInput,
    cacheWrite,
    version: `${key}@${new Date(fromMs).toISOString()}#${digest}`,
  };
}

const MILLION = 1_000_000n;

/**
 * What one attempt's usage costs, in µ$ (rounded up). `promptTokens` counts every input token, cached reads and
 * cache writes included; the cached and written parts are billed at their own prices (each capped at what is
 * left of the input, so a provider's inconsistent report never bills a token twice).
 */
export function costOf(usage: TokenUsage, price: Price): number {
  const cached = Math.min(usage.cachedInputTokens ?? 0, usage.promptTokens);
  const written = Math.min(usage.cacheWriteTokens ?? 0, usage.promptTokens - cached);
  const plain = usage.promptTokens - cached - written;
  const pico =
    BigInt(plain) * BigInt(price.input) +
    BigInt(cached) * BigInt(price.cachedInput) +
    BigInt(written) * BigInt(price.cacheWrite) +
    BigInt(usage.completionTokens) * BigInt(price.output);
  return Number((pico + MILLION - 1n) / MILLION);
}

/**
 * The most an attempt may cost, in µ$: its estimated input at the dearest input price (every token may be a cache
 * write) and the completion cap at the output price. The money budgets reserve this before the attempt as the token
 * budgets reserve the token estimate.
 */
export function estimateCost(inputTokens: number, completionCap: number, price: Price): number {
  const dearestInput = Math.max(price.input, price.cacheWrite, price.cachedInput);
  const pico = BigInt(Math.max(0, inputTokens)) * BigInt(dearestInput) + BigInt(completionCap) * BigInt(price.output);
  return Number((pico + MILLION - 1n) / MILLION);
}

/** µ$ as a dollar string with six decimals (`0.001234`), for views and reports: never parsed back. */
export function formatMicros(micros: number): string {
  const sign = micros < 0 ? '-' : '';
  const abs = Math.abs(micros);
  return `${sign}${Math.floor(abs / 1e6)}.${String(abs % 1e6).padStart(6, '0')}`;
}
