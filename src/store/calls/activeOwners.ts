/** Typed call of activeOwners-2.lua: the owners named by a shard queue's active lock tokens. */
import type { Redis } from 'ioredis';
import type { KeySpace } from '../keys.js';
import { script } from '../luaScripts.js';

/**
 * Distinct owners (src/store/owners.ts) that hold the shard queue's active jobs. `node` is the connection to the
 * server that owns the shard's hash slot. `keepMs`: the scan's answer is shared by every watcher's call for that long
 * (0: scanned on every call, nothing kept).
 */
export async function activeOwners(node: Redis, keys: KeySpace, shard: number, keepMs: number): Promise<string[]> {
  const q = keys.queueStateKeys(shard);
  const res = await script(node, 'activeOwners')(q.active, q.ownersScan, keys.queueKeyPrefix(shard), keepMs);
  return Array.isArray(res) ? res.map(String) : [];
}
