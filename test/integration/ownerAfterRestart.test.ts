/**
 * Liveness across a Redis restart (and so a failover: a promoted replica numbers its connections anew too). A
 * restarted server hands out client ids from the start again, so a job lock or an admission mark written before
 * the restart can name an id that a new, live connection now has. Owners name their server process as well
 * (src/store/owners.ts): the dead owner's job moves at the next tick, not when its lock expires, and the admission
 * it left pending is promoted by the next sweep. Without the server part, both were taken for alive.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { startEmbeddedRedis, type EmbeddedRedis } from '../../testkit/embeddedRedis.js';
import { createHarness, type Harness } from '../../testkit/harness.js';
import { ownerOfConnection, parseOwner } from '../../src/store/owners.js';
import { OwnerWatch } from '../../src/worker/ownerWatch.js';
import { stepJobId } from '../../src/store/keys.js';
import { until } from '../../testkit/until.js';

let server: EmbeddedRedis;
let h: Harness;
const extra: Redis[] = [];

beforeAll(async () => {
  server = await startEmbeddedRedis({ appendfsync: 'always' });
  h = await createHarness('ownerrestart', { REDIS_URL: server.url, FLOW_CONTROL: 'true', FLOW_SWEEP_MS: '600000' });
}, 30_000);
afterAll(async () => {
  for (const c of extra) c.disconnect();
  await h?.close().catch(() => {});
  await server?.stop();
});

/** Opens connections to the restarted server until a live one has client id `id` (ids start from the bottom again). */
async function liveConnectionWithId(id: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (String(await h.ctx.redis.client('LIST', 'ID', id)).includes(`id=${id} `)) return;
    const c = new Redis(server.url);
    extra.push(c);
    if (Number(await c.client('ID')) > Number(id)) break;
  }
  throw new Error(`no live connection has client id ${id} after the restart`);
}

/** A connection whose id is above those the harness's own connections take again after a restart. */
async function deadConnection(): Promise<Redis> {
  for (let i = 0; i < 30; i++) {
    const c = new Redis(server.url);
    await c.ping();
    await c.quit();
  }
  return new Redis(server.url);
}

async function restart(): Promise<void> {
  await server.kill('SIGKILL');
  await server.restart();
  await until('the harness connection ready again', 5000, () => h.ctx.redis.status === 'ready');
  await h.ctx.redis.ping();
}

describe('owners after a Redis restart', () => {
  it("a job locked by a connection from before the restart moves at the next tick, though a live connection has that connection's id", async () => {
    const shard = 0;
    const k = h.ctx.keys.queueStateKeys(shard);
    const dead = await deadConnection();
    const deadOwner = await ownerOfConnection(dead);
    await h.ctx.queues.byShard(shard).add('step', {}, { jobId: 'held' });
    await h.ctx.redis.lmove(k.wait, k.active, 'RIGHT', 'LEFT');
    await h.ctx.redis.set(h.ctx.keys.jobLock(shard, 'held'), `probe@${deadOwner}:1`, 'PX', 120_000);
    dead.disconnect();

    await restart();
    await liveConnectionWithId(parseOwner(deadOwner)!.clientId);
    expect(await h.ctx.redis.lrange(k.active, 0, -1)).toEqual(['held']);

    const watch = new OwnerWatch(h.ctx, [{ shard, worker: { id: 'watcher' } }], { intervalMs: 0, maxStalledCount: 5 });
    await watch.tick();
    expect(await h.ctx.redis.lrange(k.active, 0, -1)).toEqual([]);
    expect(await h.ctx.redis.lrange(k.wait, 0, -1)).toEqual(['held']);
    expect((await h.ctx.metrics.ownerWatchErrors.get()).values[0]?.value ?? 0).toBe(0);
  }, 30_000);

  it('an admission left pending by a connection from before the restart is promoted by the next sweep', async () => {
    const admission = h.ctx.admission!;
    const dead = await deadConnection();
    const deadOwner = await ownerOfConnection(dead);
    const runId = 'r_0123456789abcdef0123abcd';
    const shard = h.ctx.keys.shardOf(runId);
    const jobId = stepJobId(runId, 1);
    // The run's step 1 job waits in the delayed set for its admission (as createRun leaves it under flow control).
    await h.ctx.queues.byShard(shard).add('step', { runId, step: 1 }, { jobId, delay: 3_600_000 });
    const f = h.ctx.keys.flow();
    await h.ctx.redis.hset(
      f.held,
      runId,
      JSON.stringify({ tenant: 't1', agent: 'support', shard, priority: 0, at: 1 }),
    );
    await h.ctx.redis.hset(f.pending, runId, deadOwner);
    dead.disconnect();

    await restart();
    await liveConnectionWithId(parseOwner(deadOwner)!.clientId);
    await h.ctx.redis.hset(h.ctx.keys.run(runId).run, 'status', 'queued');
    const swept = await admission.sweep();
    expect(swept.promoted).toBe(1);
    // In the queue, with its tenant's step priority (src/flow/stepPriority.ts): the only tenant, so the wait list.
    expect(await h.ctx.queues.byShard(shard).getJobState(jobId)).toBe('waiting');
    expect(await h.ctx.redis.hexists(f.pending, runId)).toBe(0);
  }, 30_000);
});
