/**
 * Flow control on a real Redis Cluster (3 masters, 6 shards). Admission's keys share the hash tag
 * `{flow}` (one slot, one node), each model rate bucket has its own tag `{rate:<bucket>}`, and each
 * run's keys and step queue stay on its shard: runs on several nodes, one admission counter and one
 * bucket each checked and taken inside one script. Two tenants with a limit of 2 runs at work, a
 * scripted-model bucket of 300 requests a minute holding one second (5 calls, then 5 a second):
 * every run completes, no tenant ever has more than 2 runs running (sampled from the runs' own
 * status, every 10 ms), and no 2-second window of model calls holds more than the bucket allows.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalCluster, type LocalCluster } from '../../testkit/cluster.js';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { startRun } from '../../src/producer/intake.js';
import { redisServerOnPath } from '../../testkit/embeddedRedis.js';
import { nodeForKey } from '../../src/store/connect.js';
import type { Script } from '../../src/models/scriptedTurns.js';
import { readRunEvents } from '../../testkit/runEvents.js';

const TENANTS = ['acme', 'beta'];
const RUNS_PER_TENANT = 6;
const STEPS = 3;
const RPM = 300;
const usage = { promptTokens: 10, completionTokens: 2 };
const script: Script = [
  ...Array.from({ length: STEPS - 1 }, () => ({
    toolCalls: [{ name: 'read_ticket', args: {} }],
    usage,
    transientFailures: 0,
  })),
  { toolCalls: [], final: 'done', usage, transientFailures: 0 },
];

let cluster: LocalCluster;
let h: Harness;

describe.skipIf(!redisServerOnPath())('flow control on Redis Cluster', () => {
  beforeAll(async () => {
    cluster = await startLocalCluster(3);
    h = await createHarness('clusterflow', {
      REDIS_CLUSTER_NODES: cluster.nodes.join(','),
      SHARDS: '6',
      FLOW_CONTROL: 'true',
      FLOW_TENANT_CONCURRENCY: '2',
      MODEL_RATE_LIMITS: JSON.stringify([{ provider: 'scripted', rpm: RPM, tpm: 0 }]),
      MODEL_RATE_BURST_MS: '1000',
    });
  }, 60_000);
  afterAll(async () => {
    await h?.close();
    await cluster?.stop();
  });

  it('runs on several nodes, the tenant limits and the model bucket hold across shards', async () => {
    const runs: { runId: string; tenant: string }[] = [];
    for (let i = 0; i < RUNS_PER_TENANT; i++)
      for (const tenant of TENANTS) {
        const ticket = { ...sampleTicket(`CFL-${tenant}-${i}`), subject: `order ${i}` };
        const r = await startRun(h.ctx, { tenant, ticket, agent: { model: 'scripted', script } }, `cfl-${tenant}-${i}`);
        runs.push({ runId: r.runId, tenant });
      }
    const nodes = await Promise.all(runs.map((r) => nodeForKey(h.ctx.redis, h.ctx.keys.run(r.runId).run)));
    expect(new Set(nodes.map((n) => `${n.options.host}:${n.options.port}`)).size).toBeGreaterThan(1);

    const most: Record<string, number> = {};
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const statuses = await Promise.all(runs.map((r) => h.ctx.redis.hget(h.ctx.keys.run(r.runId).run, 'status')));
        for (const tenant of TENANTS) {
          const n = statuses.filter((s, i) => s === 'running' && runs[i]!.tenant === tenant).length;
          most[tenant] = Math.max(most[tenant] ?? 0, n);
        }
        await new Promise((r) => setTimeout(r, 10)); // the sampler's period, until the runs end
      }
    })();
    await h.startWorker();
    for (const r of runs) expect(await h.waitForStatus(r.runId, ['completed', 'failed'], 90_000)).toBe('completed');
    sampling = false;
    await sampler;
    for (const tenant of TENANTS) {
      expect(most[tenant]).toBeGreaterThan(0);
      expect(most[tenant]).toBeLessThanOrEqual(2);
    }

    // Every model call is journalled as a decision event; its stream id is the Redis time it was written.
    const calls: number[] = [];
    for (const r of runs) {
      for (const e of await readRunEvents(h.ctx, r.runId))
        if (e.type === 'decision') calls.push(Number(e.entry.split('-')[0]));
    }
    calls.sort((a, b) => a - b);
    expect(calls).toHaveLength(runs.length * STEPS);
    // The bucket holds 5 calls and refills 5 a second: any 2 s see at most 5 + 10 (a little slack for the time between
    // a reservation and its decision being written).
    const perSecond = RPM / 60;
    for (let i = 0; i < calls.length; i++) {
      const inWindow = calls.filter((t) => t >= calls[i]! && t < calls[i]! + 2000).length;
      expect(inWindow).toBeLessThanOrEqual(perSecond + 2 * perSecond + 2);
    }
    expect(calls.at(-1)! - calls[0]!).toBeGreaterThan(((calls.length - perSecond) / perSecond) * 1000 - 1000);
    // One counter for the whole fleet, on one node, back to zero; each bucket on its own slot.
    expect(await h.ctx.redis.hget(h.ctx.keys.flow().counts, 'all')).toBe('0');
    expect(await h.ctx.redis.exists(h.ctx.keys.rateBucket('scripted/*').bucket)).toBe(1);
  }, 150_000);
});
