/**
 * Work spread on a Cluster: each step-queue shard (and every key of its runs) lives in the slot of its hash tag,
 * so the masters that own none of the shards' slots take no work, and a failover of a master that owns them all
 * stops everything. Checked at boot, against the slot table the client found.
 */
import calculateSlot from 'cluster-key-slot';
import { Cluster } from 'ioredis';
import type { RedisClient } from './connect.js';
import type { KeySpace } from './keys.js';

/** Shards per master (host:port), every master listed (an idle one with 0); empty on a single Redis. */
export function shardsPerMaster(client: RedisClient, keys: KeySpace): Map<string, number> {
  const spread = new Map<string, number>();
  if (!(client instanceof Cluster)) return spread;
  for (const node of client.nodes('master')) spread.set(`${node.options.host}:${node.options.port}`, 0);
  for (const shard of keys.allShards()) {
    const owner = client.slots[calculateSlot(keys.queueName(shard))]?.[0];
    if (owner !== undefined) spread.set(owner, (spread.get(owner) ?? 0) + 1);
  }
  return spread;
}
