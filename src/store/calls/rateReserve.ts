/** Typed calls of src/store/lua/rateReserve-2.lua: a model rate limit's token bucket. */
import type { RedisClient } from '../connect.js';
import { script } from '../luaScripts.js';

export interface BucketKeys {
  bucket: string;
  series: string;
}

export interface BucketLimits {
  rpm: number;
  tpm: number;
  burstMs: number;
}

/** How long the usage series is kept (the console plots the last minutes). */
const SERIES_RETENTION_MS = 3600_000;

const call = (redis: RedisClient, k: BucketKeys, l: BucketLimits, now: number, op: string, a: number, b = 0) =>
  script(redis, 'rateReserve')(k.bucket, k.series, now, l.rpm, l.tpm, l.burstMs, op, a, b, SERIES_RETENTION_MS);

/** 0: one request and `tokens` reserved; else the ms to wait (nothing reserved). */
export async function rateReserve(
  redis: RedisClient,
  k: BucketKeys,
  l: BucketLimits,
  now: number,
  tokens: number,
): Promise<number> {
  return Number(await call(redis, k, l, now, 'reserve', tokens));
}

/** The attempt's real use: `used - estimate` back to (or out of) the bucket; `used` into the series. */
export async function rateSettle(
  redis: RedisClient,
  k: BucketKeys,
  l: BucketLimits,
  now: number,
  estimate: number,
  used: number,
): Promise<void> {
  await call(redis, k, l, now, 'settle', used - estimate, used);
}

/** A 429 that still came: the bucket empties and refuses until `waitMs` from now. */
export async function rateBlock(
  redis: RedisClient,
  k: BucketKeys,
  l: BucketLimits,
  now: number,
  waitMs: number,
): Promise<void> {
  await call(redis, k, l, now, 'block', waitMs);
}
