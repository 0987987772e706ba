/**
 * Follow-ups on a real Redis Cluster (3 masters, 6 shards): every run of a subject is placed on
 * the subject's home shard (runIdForEvent), so createRun links it to the subject's latest run in
 * one slot. Two events on each of 12 subjects: linked pairs, each pair on one shard, both run.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalCluster, type LocalCluster } from '../../testkit/cluster.js';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { startRun } from '../../src/producer/intake.js';
import { redisServerOnPath } from '../../testkit/embeddedRedis.js';

const SUBJECTS = 12;
let cluster: LocalCluster;
let h: Harness;

describe.skipIf(!redisServerOnPath())('follow-ups on Redis Cluster', () => {
  beforeAll(async () => {
    cluster = await startLocalCluster(3);
    h = await createHarness('clusterfollowups', {
      REDIS_CLUSTER_NODES: cluster.nodes.join(','),
      SHARDS: '6',
      FOLLOW_UP_WAIT_MS: '50',
    });
  }, 60_000);
  afterAll(async () => {
    await h?.close();
    await cluster?.stop();
  });

  it('two events per subject: two runs on the subject shard, linked, both completed', async () => {
    const pairs: [string, string][] = [];
    for (let i = 0; i < SUBJECTS; i++) {
      const ticket = { ...sampleTicket(`CF-${i}`), customer: { email: `c${i}@example.com`, name: `C${i}` } };
      const first = await startRun(h.ctx, { tenant: 'acme', ticket }, undefined, Date.now(), 'e-1');
      const second = await startRun(
        h.ctx,
        { tenant: 'acme', ticket: { ...ticket, body: 'Any news?' } },
        undefined,
        Date.now(),
        'e-2',
      );
      expect(first.created && second.created).toBe(true);
      expect(second.previousRunId).toBe(first.runId);
      expect(h.ctx.keys.shardOf(second.runId)).toBe(h.ctx.keys.shardOf(first.runId));
      pairs.push([first.runId, second.runId]);
    }
    expect(new Set(pairs.map(([a]) => h.ctx.keys.shardOf(a))).size).toBeGreaterThan(1);
    await h.startWorker();
    for (const [a, b] of pairs) {
      await h.waitForStatus(a, ['completed'], 60_000);
      await h.waitForStatus(b, ['completed'], 60_000);
      expect(await h.ctx.redis.hget(h.ctx.keys.run(a).run, 'nextRunId')).toBe(b);
    }
  }, 120_000);
});
