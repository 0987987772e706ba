/**
 * Acknowledged means replicated, on a real master with a real replica: the replica frozen (SIGSTOP) stops
 * acknowledging, so the master's writes exist only there. Then no 201 is given (503 + Retry-After) and no request
 * leaves for a write tool (the action goes safe_retry, the step waits); once the replica is back, the same run
 * finishes with one ticket and one email. And a lost connection answers 503 on every route, never 500.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { until } from '../../testkit/until.js';
import { createHarness, producerAuth, sampleTicket, type Harness } from '../../testkit/harness.js';
import { startEmbeddedRedis, type EmbeddedRedis } from '../../testkit/embeddedRedis.js';
import { replicated, waitModeOf, NotReplicatedError } from '../../src/store/replicated.js';
import { buildSpec } from '../../src/producer/intake.js';
import { runReplicated } from '../../src/runs/replication.js';
import { Ledger } from '../../src/ledger/ledger.js';
import type { Redis } from 'ioredis';

let master: EmbeddedRedis;
let replica: EmbeddedRedis;
let h: Harness;
let firstRunId = '';

const post = (url: string, body: unknown, key: string) =>
  fetch(`${url}/v1/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key, ...producerAuth },
    body: JSON.stringify(body),
  });

async function replicaOnline(): Promise<void> {
  await until('the replica online', 30_000, async () =>
    /slave0:.*state=online/.test(await (h.ctx.redis as Redis).info('replication')),
  );
}

describe('replication waits (REDIS_MIN_REPLICAS=1)', () => {
  beforeAll(async () => {
    master = await startEmbeddedRedis();
    replica = await startEmbeddedRedis({ extraArgs: ['--replicaof', '127.0.0.1', String(master.port)] });
    h = await createHarness('replication', {
      REDIS_URL: master.url,
      REDIS_MIN_REPLICAS: '1',
      REDIS_REPLICA_WAIT_MS: '200',
      STORE_RETRY_AFTER_S: '1',
    });
    await replicaOnline();
  }, 60_000);
  afterAll(async () => {
    replica?.process?.kill('SIGCONT');
    await h?.close();
    await replica?.stop();
    await master?.stop();
  });

  it('waits for the replica; Redis 7.0 has no WAITAOF and says so', async () => {
    const key = h.ctx.keys.replicaFence(0);
    expect(await replicated(h.ctx.redis, key, { minReplicas: 1, timeoutMs: 1000 })).toBe(1);
    const version = String(await (h.ctx.redis as Redis).info('server')).match(/redis_version:(\d+)\.(\d+)/)!;
    const hasWaitAof = Number(version[1]) > 7 || (Number(version[1]) === 7 && Number(version[2]) >= 2);
    expect((await waitModeOf(h.ctx.redis as Redis)).waitAof).toBe(hasWaitAof);
    expect(await replicated(h.ctx.redis, key, { minReplicas: 0, timeoutMs: 1000 })).toBe(0);
  });

  it("a wait covers another connection's write: a connection that wrote nothing lately still waits for it", async () => {
    const key = h.ctx.keys.replicaFence(0);
    // This connection's last write is replicated; then another connection writes while the replica is frozen.
    await replicated(h.ctx.redis, key, { minReplicas: 1, timeoutMs: 1000 });
    const other = (h.ctx.redis as Redis).duplicate();
    replica.process!.kill('SIGSTOP');
    try {
      await other.set(h.ctx.keys.run('r_other').run, 'only on the master');
      await expect(replicated(h.ctx.redis, key, { minReplicas: 1, timeoutMs: 200 })).rejects.toMatchObject({
        code: 'not_replicated',
      });
    } finally {
      replica.process!.kill('SIGCONT');
      other.disconnect();
    }
    await replicaOnline();
  });

  it('a wait whose server lacks the write it is for fails: a wait resent to a promoted replica acknowledges nothing', async () => {
    const fence = h.ctx.keys.replicaFence(0);
    const opts = { minReplicas: 1, timeoutMs: 500 };
    const absent = { key: h.ctx.keys.run('r_absent').run, field: 'status' };
    await expect(replicated(h.ctx.redis, fence, opts, 1000, absent)).rejects.toMatchObject({ code: 'not_replicated' });
    const present = { key: h.ctx.keys.run('r_present').run, field: 'status', expect: 'running' };
    await h.ctx.redis.hset(present.key, { status: 'running' });
    expect(await replicated(h.ctx.redis, fence, opts, 1000, present)).toBe(1);
    await h.ctx.redis.del(present.key);
  });

  it('a wait blocked by a lagging replica holds up no other command: waits run on their own connections', async () => {
    expect(h.ctx.replicaWaits).toBeDefined();
    const ctx = { ...h.ctx, cfg: { ...h.ctx.cfg, REDIS_REPLICA_WAIT_MS: 3000 } };
    replica.process!.kill('SIGSTOP');
    try {
      let settled = false;
      const wait = runReplicated(ctx, 'r_0123456789abcdef01234567', 'intake', {
        key: h.ctx.keys.replicaFence(0),
        field: 'x',
      })
        .catch(() => {})
        .finally(() => (settled = true));
      // The WAIT is at the server, blocked on the stopped replica.
      await until('the WAIT blocked at the server', 5000, async () =>
        / cmd=wait /.test((await (h.ctx.redis as Redis).client('LIST')) as string),
      );
      // On the shared connection these would queue behind the WAIT until its 3 s timeout.
      await h.ctx.redis.set(h.ctx.keys.run('r_meanwhile').run, 'x');
      expect(await h.ctx.redis.get(h.ctx.keys.run('r_meanwhile').run)).toBe('x');
      expect(settled).toBe(false);
      await wait;
    } finally {
      replica.process!.kill('SIGCONT');
      await h.ctx.redis.del(h.ctx.keys.run('r_meanwhile').run);
    }
    await replicaOnline();
  }, 30_000);

  it('waits that arrive together share one WAIT, each with its own witness', async () => {
    const waitCalls = async () =>
      Number(/cmdstat_wait:calls=(\d+)/.exec(await (h.ctx.redis as Redis).info('commandstats'))?.[1] ?? 0);
    const conn = h.ctx.replicaWaits!;
    const fence = h.ctx.keys.replicaFence(0);
    const opts = { minReplicas: 1, timeoutMs: 1000 };
    const present = { key: h.ctx.keys.run('r_grouped').run, field: 'status' };
    await h.ctx.redis.hset(present.key, { status: 'running' });
    const before = await waitCalls();
    const results = await Promise.allSettled([
      ...Array.from({ length: 20 }, () => replicated(conn, fence, opts, 1000, present)),
      replicated(conn, fence, opts, 1000, { key: h.ctx.keys.run('r_never').run, field: 'status' }),
    ]);
    expect(results.slice(0, 20).every((r) => r.status === 'fulfilled' && r.value === 1)).toBe(true);
    expect(results[20]).toMatchObject({ status: 'rejected', reason: { code: 'not_replicated' } });
    // The first wait goes out alone; the others, arriving while it is in flight, share the next one.
    expect((await waitCalls()) - before).toBeLessThanOrEqual(2);
    await h.ctx.redis.del(present.key);
  });

  it('a run is acknowledged (201) only once a replica has it: a frozen replica gets the caller a 503 with Retry-After', async () => {
    const { url } = await h.startApi();
    const body = { tenant: 'acme', ticket: sampleTicket('REPL-1') };
    replica.process!.kill('SIGSTOP');
    try {
      const refused = await post(url, body, 'repl-ev-1');
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(await refused.json()).toMatchObject({ error: 'store_unavailable' });
      // The retry finds the run the master kept, still only there: no 200 for it either.
      const found = await post(url, body, 'repl-ev-1');
      expect(found.status).toBe(503);
      await expect(
        replicated(h.ctx.redis, h.ctx.keys.replicaFence(0), { minReplicas: 1, timeoutMs: 100 }),
      ).rejects.toBeInstanceOf(NotReplicatedError);
    } finally {
      replica.process!.kill('SIGCONT');
    }
    await replicaOnline();
    // The caller's retry with the same key finds the run the master kept (200), now replicated.
    const again = await post(url, body, 'repl-ev-1');
    expect([200, 201]).toContain(again.status);
    firstRunId = ((await again.json()) as { runId: string }).runId;
    const metrics = await h.ctx.metrics.registry.getSingleMetricAsString('agent_replication_wait_seconds');
    expect(metrics).toMatch(/agent_replication_wait_seconds_count\{write="intake",outcome="not_replicated"\} [1-9]/);
  }, 30_000);

  it('no request leaves for a write while the replica lags: safe_retry, then one ticket and one email once it is back', async () => {
    const spec = buildSpec(h.ctx, { tenant: 'acme', ticket: sampleTicket('REPL-2') }, Date.now());
    expect(await h.ctx.store.create(spec, Date.now())).toBe(true);
    await replicaOnline();
    replica.process!.kill('SIGSTOP');
    const ledger = new Ledger(h.ctx.redis, h.ctx.keys);
    try {
      await h.startWorker();
      await until('a safe_retry action', 15_000, async () =>
        (await ledger.listForRun(spec.runId)).some((a) => a.state === 'safe_retry'),
      );
      expect(h.sandbox.counts().byResource.tickets?.records ?? 0).toBe(0);
      expect(await h.ctx.redis.hget(h.ctx.keys.run(spec.runId).run, 'status')).toBe('running');
    } finally {
      replica.process!.kill('SIGCONT');
    }
    await h.waitForStatus(spec.runId, ['completed'], 60_000);
    await h.waitForStatus(firstRunId, ['completed'], 60_000);
    // One ticket and one email per run (this one and the one the previous test acknowledged).
    const counts = h.sandbox.counts();
    expect(counts.duplicates).toBe(0);
    expect(counts.byResource.tickets.records).toBe(2);
    expect(counts.byResource.emails.records).toBe(2);
  }, 90_000);
});

describe('a lost store answers 503 with Retry-After, never 500', () => {
  let lost: EmbeddedRedis;
  let hl: Harness;
  beforeAll(async () => {
    lost = await startEmbeddedRedis();
    hl = await createHarness('storelost', { REDIS_URL: lost.url, STORE_RETRY_AFTER_S: '3' });
  }, 30_000);
  afterAll(async () => {
    await lost?.stop();
    await hl?.close().catch(() => {});
  });

  it('run intake, run views, readiness', async () => {
    const { url } = await hl.startApi();
    expect((await fetch(`${url}/readyz`)).status).toBe(200);
    await lost.kill('SIGKILL');
    await until('the store connection lost', 5000, () => hl.ctx.redis.status !== 'ready');
    const created = await post(url, { tenant: 'acme', ticket: sampleTicket('LOST-1') }, 'lost-ev-1');
    expect(created.status).toBe(503);
    expect(created.headers.get('retry-after')).toBe('3');
    const view = await fetch(`${url}/v1/runs/r_0123456789abcdef01234567`, { headers: producerAuth });
    expect(view.status).toBe(503);
    expect((await fetch(`${url}/readyz`)).status).toBe(503);
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    await lost.restart();
  }, 30_000);
});
