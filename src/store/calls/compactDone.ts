/** Typed call of src/store/lua/compactDone-1.lua: a compacted run off its shard's queue, fenced on its claim. */
import type { RedisClient } from '../connect.js';
import { script } from '../luaScripts.js';
import type { CompactClaim } from './compactClaim.js';

/** True when dequeued; false when the run ended again since the claim (it stays queued for that end). */
export async function compactDoneCall(redis: RedisClient, queue: string, claim: CompactClaim): Promise<boolean> {
  return (await script(redis, 'compactDone')(queue, claim.runId, claim.score)) === 1;
}
