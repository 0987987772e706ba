/**
 * The owner watch on a real Redis Cluster: client ids are per node, so each
 * shard's worker names the connection to the master that owns its slot, and the
 * watch asks that node. A job whose lock names a vanished connection on that
 * node goes back to wait; the watch itself raises no error.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { startLocalCluster, type LocalCluster } from '../../testkit/cluster.js';
import { createHarness, type Harness } from '../../testkit/harness.js';
import { nodeForKey } from '../../src/store/connect.js';
import { ownerOfToken } from '../../src/store/bullmqInternals.js';
import { ownerOfConnection } from '../../src/store/owners.js';
import { until } from '../../testkit/until.js';

let cluster: LocalCluster;
let h: Harness;
beforeAll(async () => {
  cluster = await startLocalCluster(3);
  h = await createHarness('clusterwatch', {
    REDIS_CLUSTER_NODES: cluster.nodes.join(','),
    SHARDS: '6',
    OWNER_WATCH_MS: '0',
  });
}, 60_000);
afterAll(async () => {
  await h?.close();
  await cluster?.stop();
});

describe('owner watch on Redis Cluster', () => {
  it("names each shard worker after its connection to the slot's master, and requeues a vanished connection's job there", async () => {
    const fleet = await h.startWorker();
    for (const [shard, w] of fleet.workers.entries()) {
      const node = await nodeForKey(h.ctx.redis, h.ctx.keys.queueStateKeys(shard).active);
      expect(ownerOfToken(`${w.id}:0`)).toBe(await ownerOfConnection(node));
    }
    await fleet.stop(true);

    const shard = 2;
    const k = h.ctx.keys.queueStateKeys(shard);
    const node = await nodeForKey(h.ctx.redis, k.active);
    const owner = new Redis(node.options.port!, node.options.host!);
    const ownerName = await ownerOfConnection(owner);
    const clientId = Number(ownerName.split('-')[0]);
    await h.ctx.queues.byShard(shard).add('step', {}, { jobId: 'held' });
    // The job as a worker on `owner` would hold it: active, locked with a token naming that connection.
    await h.ctx.redis.lmove(k.wait, k.active, 'RIGHT', 'LEFT');
    await h.ctx.redis.set(h.ctx.keys.jobLock(shard, 'held'), `probe@${ownerName}:1`, 'PX', 60_000);
    await fleet.ownerWatch.tick();
    expect(await h.ctx.redis.lrange(k.active, 0, -1)).toEqual(['held']);

    owner.disconnect();
    const gone = async () => !String(await node.client('LIST', 'ID', String(clientId))).includes(`id=${clientId} `);
    await until(`connection ${clientId} gone from the node`, 10_000, gone, 10);
    await fleet.ownerWatch.tick();
    expect(await h.ctx.redis.lrange(k.wait, 0, -1)).toEqual(['held']);
    expect(await h.ctx.redis.exists(h.ctx.keys.jobLock(shard, 'held'))).toBe(0);
    expect((await h.ctx.metrics.ownerWatchErrors.get()).values[0]?.value ?? 0).toBe(0);
  });
});
