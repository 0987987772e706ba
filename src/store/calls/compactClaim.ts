/** Typed call of src/store/lua/compactClaim-1.lua: the oldest ended runs of a shard's compaction queue, claimed. */
import type { RedisClient } from '../connect.js';
import { script } from '../luaScripts.js';

export interface CompactClaim {
  runId: string;
  /** The claim's score: the dequeue is fenced on it. */
  score: string;
}

export interface CompactClaims {
  claims: CompactClaim[];
  /** The queue's lowest score before the claim (ms; undefined: empty): a claim's lies ahead, a waiting run's behind. */
  lowest: number | undefined;
}

export async function compactClaimCall(
  redis: RedisClient,
  queue: string,
  now: number,
  leaseMs: number,
  max: number,
): Promise<CompactClaims> {
  const flat = (await script(redis, 'compactClaim')(queue, now, leaseMs, max)) as string[];
  const claims: CompactClaim[] = [];
  for (let i = 1; i < flat.length; i += 2) claims.push({ runId: flat[i]!, score: flat[i + 1]! });
  return { claims, lowest: flat[0] ? Number(flat[0]) : undefined };
}
