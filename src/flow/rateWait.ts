/**
 * The step's side of the model rate limits (src/flow/rateLimits.ts): a reservation around each
 * model attempt, and the wait when the bucket is empty. The wait is a delayed step job (no worker
 * sleeps; nothing was sent to the model), bounded by the run's deadline: a wait that would end at or
 * past it stops the run `budget_exceeded` (wall_clock), by the commit, with its status, event and metric.
 */
import { DelayedError } from 'bullmq';
import type { Logger } from 'pino';
import { AgentError, isRetryable } from '../core/errors.js';
import type { Metrics } from '../metrics/metrics.js';
import { wallClockStop } from '../budget/tenantBudget.js';
import type { Budgeted } from '../budget/policy.js';
import type { Bucket, RateLimits } from './rateLimits.js';

/** The bucket is empty (or blocked by a 429): the attempt was not made; wait `waitMs`. Passes through withRetry. */
export class RateLimitWait extends AgentError {
  constructor(
    readonly bucket: string,
    readonly waitMs: number,
  ) {
    super('rate_limited', `model rate limit ${bucket}: wait ${waitMs} ms`, { bucket, waitMs });
  }
}

/** One attempt's reservation: settle it with what the attempt used; report a 429 that still came. */
export interface RatedAttempt {
  settle(used: number): Promise<void>;
  failed(err: unknown, metrics: Metrics): Promise<void>;
}

/** What a rate limit reads of a run's spec: whose it is, the model it names, and its budget. */
export interface RatedRun extends Budgeted {
  tenant: string;
  modelId?: string | undefined;
}

/** A 429's wait when the provider named none: a second, then the bucket refills from empty. */
const DEFAULT_429_BLOCK_MS = 1000;

/**
 * Reserves one request and `tokens` for a model attempt, or throws RateLimitWait. Undefined when no
 * rate limit applies to the provider and model.
 */
export async function ratedAttempt(
  rates: RateLimits | undefined,
  spec: RatedRun,
  provider: string,
  tokens: number,
  now: number,
): Promise<RatedAttempt | undefined> {
  if (!rates?.any) return undefined;
  const bucket: Bucket | undefined = rates.bucketFor(provider, spec.modelId, spec.tenant);
  if (!bucket) return undefined;
  const waitMs = await rates.reserve(bucket, tokens, now);
  if (waitMs > 0) throw new RateLimitWait(bucket.bucket, waitMs);
  let settled = false;
  return {
    async settle(used) {
      if (settled) return;
      settled = true;
      await rates.settle(bucket, tokens, used, Date.now());
    },
    async failed(err, metrics) {
      if (!isRetryable(err) || err.details?.status !== 429) return;
      metrics.modelRateLimited.inc({ provider });
      await rates.block(bucket, err.retryAfterMs ?? DEFAULT_429_BLOCK_MS, Date.now());
    },
  };
}

export interface RateWaitDeps {
  metrics: Metrics;
}

export interface RateWaitStep {
  /** Moves the step job to the delayed set until `untilMs` (BullMQ's moveToDelayed with the job's lock token). */
  delay(untilMs: number): Promise<void>;
  spec: RatedRun;
  wait: RateLimitWait;
  /** Tokens the step's failed attempts spent before the wait (charged before the job moves). */
  charged: number;
  now: number;
}

/**
 * Delays the step job until the bucket can serve it (with up to 10 % jitter, so the steps waiting on
 * one bucket do not all come back in the same millisecond) and throws DelayedError, or returns the
 * reason to stop the run with (`budget_exceeded`) when that is past its deadline. If the process
 * dies before the move, the stall check redelivers the job and it asks again.
 */
export async function waitForRate(
  d: RateWaitDeps,
  s: RateWaitStep,
  hooks: { chargeAbandoned(tokens: number): Promise<void>; log: Logger },
): Promise<string> {
  const waitMs = Math.ceil(s.wait.waitMs * (1 + Math.random() * 0.1));
  if (s.now + waitMs >= s.spec.limits.deadlineAt) {
    const stop = wallClockStop(s.spec, s.now, true);
    d.metrics.budgetStops.inc({ kind: stop.kind });
    hooks.log.warn({ code: 'budget_exceeded', kind: stop.kind, bucket: s.wait.bucket, waitMs }, stop.reason);
    return `${stop.reason} waiting for the model rate limit ${s.wait.bucket}`;
  }
  if (s.charged > 0) await hooks.chargeAbandoned(s.charged);
  await s.delay(s.now + waitMs);
  d.metrics.rateLimitWaits.inc({ bucket: s.wait.bucket });
  hooks.log.info({ code: 'rate_limit_wait', bucket: s.wait.bucket, waitMs }, 'model rate limit: step delayed');
  throw new DelayedError();
}
