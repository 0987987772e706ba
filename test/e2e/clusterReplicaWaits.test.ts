/**
 * Replication waits on a Redis Cluster with replicas, across a failover: the waits run on a connection of their own
 * that sends nothing through the Cluster client's router, so no MOVED reply tells it a slot moved. Before, its slot
 * table kept naming the dead master and every wait for that master's slots failed `no connection to the master` for
 * good (a Cluster campaign answered ~20,000 503s and left 52 runs unfinished). Now it asks for the slot table again:
 * while the promoted master has no replica yet the wait says so (not_replicated: the caller retries), and once the
 * old master has rejoined as its replica the wait succeeds.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster } from 'ioredis';
import { startReplicatedCluster, type ReplicatedCluster } from '../../testkit/replicatedCluster.js';
import { NotReplicatedError, openReplicaWaitConnection, replicated } from '../../src/store/replicated.js';
import { runReplicated } from '../../src/runs/replication.js';
import { newMetrics } from '../../src/metrics/metrics.js';

let cluster: ReplicatedCluster;
let main: Cluster;
let waits: Awaited<ReturnType<typeof openReplicaWaitConnection>>;

beforeAll(async () => {
  cluster = await startReplicatedCluster({ masters: 3, nodeTimeoutMs: 1000 });
  main = new Cluster(cluster.nodes.map((n) => ({ host: '127.0.0.1', port: Number(n.split(':')[1]) })));
  await main.ping();
  waits = await openReplicaWaitConnection(main, () => {});
}, 60_000);
afterAll(async () => {
  waits?.disconnect();
  main?.disconnect();
  await cluster?.stop();
});

describe('replication waits on a Cluster with replicas, across a failover', () => {
  it('follow the slot to the promoted master: not_replicated until its replica is back, then acknowledged', async () => {
    const opts = { minReplicas: 1, timeoutMs: 500 };
    const victim = (await cluster.masters())[0]!;
    const fence = await cluster.keyOn(victim, 'fence');
    // A replica just synced can miss its first 500 ms wait on a loaded machine, as after the rejoin below.
    expect(await acknowledgedWithin(() => replicated(waits, fence, opts), 20_000)).toBe(1);

    await cluster.kill(victim);
    const promoted = await cluster.waitForFailover(victim);
    expect(promoted).not.toBe(victim);
    await main.set(fence, 'written through the router');
    // The promoted master has no replica until the old one rejoins: the wait says so; it never fails for good.
    await expect(replicated(waits, fence, opts)).rejects.toMatchObject({ code: 'not_replicated' });

    // The same through the engine's wait: a wait sent where the slot was before answers MOVED or finds the
    // connection closed; either way not replicated (a retry later), never a step error.
    const ctx = {
      redis: main,
      replicaWaits: waits,
      keys: { replicaFence: () => fence, shardOf: () => 0, run: () => ({ run: fence }) },
      cfg: { REDIS_MIN_REPLICAS: 1, REDIS_REPLICA_WAIT_MS: 500, STORE_RETRY_AFTER_S: 1 },
      metrics: newMetrics(),
    } as unknown as Parameters<typeof runReplicated>[0];
    await expect(
      runReplicated(ctx, 'r_0123456789abcdef01234567', 'intake', { key: `witness-${fence}`, field: 'x' }),
    ).rejects.toBeInstanceOf(NotReplicatedError);

    await cluster.restart(victim);
    await cluster.waitForReplicas();
    // Acknowledged once the rejoined replica has caught up: on a loaded machine its first acknowledgment can take
    // longer than one 500 ms wait, so the wait is asked again (as a delayed job would) until it answers.
    expect(await acknowledgedWithin(() => replicated(waits, fence, opts), 20_000)).toBe(1);
  }, 120_000);
});

/** The first answer of `wait` within `ms`, asking again after each not_replicated; the last refusal after that. */
async function acknowledgedWithin(wait: () => Promise<number>, ms: number): Promise<number> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      return await wait();
    } catch (err) {
      if (!(err instanceof NotReplicatedError) || Date.now() > deadline) throw err;
    }
  }
}
