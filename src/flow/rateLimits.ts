/**
 * Model rate limits held across the fleet: one Redis token bucket per provider and model (and per
 * tenant when configured so), refilled at the requests- and tokens-per-minute limit
 * (rateReserve-2.lua). Before each model attempt the step reserves one request and its pre-flight
 * estimate; after it, it settles what the attempt really used. An empty bucket answers how long to
 * wait: the step job is delayed that long (no worker sleeps), bounded by the run's deadline. A 429
 * that still comes empties the bucket until its Retry-After has passed.
 *
 * If a process dies between the reservation and the settlement, the estimate stays taken: the
 * bucket refills on its own within a minute, so a lost settlement costs throughput, never a burst
 * over the limit. Each bucket is one key (its own hash tag), so each reservation is one script on
 * the one node that owns it, on a Cluster too.
 */
import type { RedisClient } from '../store/connect.js';
import type { KeySpace } from '../store/keys.js';
import { rateBlock, rateReserve, rateSettle, type BucketLimits } from '../store/calls/rateReserve.js';

/** Slot of the usage series (rateReserve-2.lua writes 5 s slots). */
export const SERIES_SLOT_MS = 5000;

export interface RateLimitRule {
  provider: string;
  model?: string | undefined;
  rpm: number;
  tpm: number;
  perTenant?: boolean | undefined;
}

/** What the rate limits read of the configuration (src/config/config.ts documents each). */
export interface RateOptions {
  readonly MODEL_RATE_LIMITS: readonly RateLimitRule[];
  readonly MODEL_RATE_BURST_MS: number;
}

/** The bucket a model call draws from: its name (`openai/gpt-4o-mini[/tenant]`) and limits. */
export interface Bucket extends BucketLimits {
  bucket: string;
}

/** The bucket of a call, or undefined when no rule names its provider: the most specific rule (model named) wins. */
export function bucketFor(
  cfg: RateOptions,
  provider: string,
  model: string | undefined,
  tenant: string,
): Bucket | undefined {
  const rules = cfg.MODEL_RATE_LIMITS.filter(
    (r) => r.provider === provider && (r.model === undefined || r.model === model),
  );
  const rule = rules.find((r) => r.model !== undefined) ?? rules[0];
  if (!rule) return undefined;
  const name = `${rule.provider}/${rule.model ?? '*'}${rule.perTenant ? `/${tenant}` : ''}`;
  return { bucket: name, rpm: rule.rpm, tpm: rule.tpm, burstMs: cfg.MODEL_RATE_BURST_MS };
}

/** Every bucket the configuration names (a per-tenant rule once per tenant given). */
export function bucketsOf(cfg: RateOptions, tenants: readonly string[]): Bucket[] {
  return cfg.MODEL_RATE_LIMITS.flatMap((r) =>
    (r.perTenant ? tenants : ['']).map((t) => ({
      bucket: `${r.provider}/${r.model ?? '*'}${r.perTenant ? `/${t}` : ''}`,
      rpm: r.rpm,
      tpm: r.tpm,
      burstMs: cfg.MODEL_RATE_BURST_MS,
    })),
  );
}

export class RateLimits {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: KeySpace,
    private readonly cfg: RateOptions,
  ) {}

  get any(): boolean {
    return this.cfg.MODEL_RATE_LIMITS.length > 0;
  }

  bucketFor(provider: string, model: string | undefined, tenant: string): Bucket | undefined {
    return bucketFor(this.cfg, provider, model, tenant);
  }

  /** 0: reserved; else ms to wait (nothing reserved). */
  reserve(b: Bucket, tokens: number, now: number): Promise<number> {
    return rateReserve(this.redis, this.keys.rateBucket(b.bucket), b, now, tokens);
  }

  settle(b: Bucket, estimate: number, used: number, now: number): Promise<void> {
    return rateSettle(this.redis, this.keys.rateBucket(b.bucket), b, now, estimate, used);
  }

  block(b: Bucket, waitMs: number, now: number): Promise<void> {
    return rateBlock(this.redis, this.keys.rateBucket(b.bucket), b, now, waitMs);
  }
}
