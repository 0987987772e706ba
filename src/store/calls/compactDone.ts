/** Typed call of src/store/lua/compactDone-1.lua: compacted runs off their shard's queue, each fenced on its claim. */
import type { RedisClient } from '../connect.js';
import { script } from '../luaScripts.js';
import type { CompactClaim } from './compactClaim.js';

/**
 * For each claim in order: true when its run was dequeued; false when the run ended again since the claim (it stays
 * queued for that end). One request for them all.
 */
export async function compactDoneCalls(redis: RedisClient, queue: string, claims: CompactClaim[]): Promise<boolean[]> {
  if (claims.length === 0) return [];
  const args = claims.flatMap((c) => [c.runId, c.score]);
  return ((await script(redis, 'compactDone')(queue, ...args)) as number[]).map((r) => r === 1);
}

/** compactDoneCalls of one claim. */
export async function compactDoneCall(redis: RedisClient, queue: string, claim: CompactClaim): Promise<boolean> {
  return (await compactDoneCalls(redis, queue, [claim]))[0]!;
}
