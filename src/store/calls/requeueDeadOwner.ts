/** Typed call of requeueDeadOwner-6.lua: a vanished client's active jobs back to wait. */
import type { Redis } from 'ioredis';
import type { KeySpace } from '../keys.js';
import { script } from '../luaScripts.js';

/**
 * Moves back to wait the shard queue's active jobs whose lock still names
 * `clientId` (a connection Redis no longer has), counting a stall on each.
 * Returns the ids of the jobs moved. Safe to call twice or from several
 * watchers at once: a job is moved only while its lock names that client.
 */
export async function requeueDeadOwner(
  node: Redis,
  keys: KeySpace,
  shard: number,
  clientId: string,
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
    keys.queueKeyPrefix(shard),
    clientId,
    maxStalledCount,
  );
  return Array.isArray(res) ? res.map(String) : [];
}
