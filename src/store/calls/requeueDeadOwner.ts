/** Typed call of requeueDeadOwner-7.lua: a vanished owner's active jobs back to wait. */
import type { Redis } from 'ioredis';
import type { KeySpace } from '../keys.js';
import { script } from '../luaScripts.js';

/**
 * Moves back to wait the shard queue's active jobs whose lock still names
 * `owner` (a connection Redis no longer has, src/store/owners.ts), counting a stall on each.
 * Returns the ids of the jobs moved. Safe to call twice or from several
 * watchers at once: a job is moved only while its lock names that owner.
 */
export async function requeueDeadOwner(
  node: Redis,
  keys: KeySpace,
  shard: number,
  owner: string,
  maxStalledCount: number,
): Promise<string[]> {
  const k = keys.queueStateKeys(shard);
  const res = await script(node, 'requeueDeadOwner')(
    k.active,
    k.wait,
    k.stalled,
    k.meta,
    k.marker,
    k.events,
    k.ownersScan,
    keys.queueKeyPrefix(shard),
    owner,
    maxStalledCount,
  );
  return Array.isArray(res) ? res.map(String) : [];
}
