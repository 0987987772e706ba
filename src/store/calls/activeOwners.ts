/** Typed call of activeOwners-1.lua: the owners named by a shard queue's active lock tokens. */
import type { Redis } from 'ioredis';
import type { KeySpace } from '../keys.js';
import { script } from '../luaScripts.js';

/**
 * Distinct owners (src/store/owners.ts) that hold the shard queue's active jobs (read only).
 * `node` is the connection to the server that owns the shard's hash slot.
 */
export async function activeOwners(node: Redis, keys: KeySpace, shard: number): Promise<string[]> {
  const res = await script(node, 'activeOwners')(keys.queueStateKeys(shard).active, keys.queueKeyPrefix(shard));
  return Array.isArray(res) ? res.map(String) : [];
}
