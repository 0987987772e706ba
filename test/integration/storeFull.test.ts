/**
 * Redis at maxmemory (the noeviction policy the processes require) refuses writes with OOM. Through the real API on
 * a Redis of its own: a run's creation is answered 503 store_full with Retry-After (it was an undocumented
 * 500 internal_error the client did not retry), nothing of it is written, and it is counted
 * (agent_store_refusals_total{reason="full"}, which AgentStoreFull reads); once maxmemory is raised the same
 * request (same Idempotency-Key) creates the run, and FleetClient's createRun waits out a full store on its own.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FleetClient, StoreUnavailable } from '../../src/client/index.js';
import { startEmbeddedRedis, type EmbeddedRedis } from '../../testkit/embeddedRedis.js';
import { createHarness, PRODUCER_TOKEN, sampleTicket, type Harness } from '../../testkit/harness.js';
import { until } from '../../testkit/until.js';

let redis: EmbeddedRedis;
let h: Harness;
let admin: Redis;
let url: string;
beforeAll(async () => {
  redis = await startEmbeddedRedis();
  admin = new Redis(redis.url);
  h = await createHarness('storefull', { REDIS_URL: redis.url, STORE_RETRY_AFTER_S: '1' });
  ({ url } = await h.startApi());
}, 60_000);
afterAll(async () => {
  await h?.close();
  admin?.disconnect();
  await redis?.stop();
});

/** maxmemory below what is in use: every write is refused (OOM), reads are served. */
const fill = () => admin.config('SET', 'maxmemory', '1');
const makeRoom = () => admin.config('SET', 'maxmemory', '0');

const post = (key: string, id: string) =>
  fetch(`${url}/v1/runs`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${PRODUCER_TOKEN}`,
      'idempotency-key': key,
    },
    body: JSON.stringify({ tenant: 'acme', ticket: sampleTicket(id) }),
  });

const refusedFull = async () =>
  (await h.ctx.metrics.storeRefusals.get()).values.find((v) => v.labels.reason === 'full' && v.labels.where === 'api')
    ?.value ?? 0;

describe('a full Redis', () => {
  it('answers a create 503 store_full with Retry-After, writes nothing, and creates the run once there is room', async () => {
    const keysBefore = await admin.dbsize();
    await fill();
    try {
      const res = await post('full-1', 'FULL-1');
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('1');
      const body = (await res.json()) as { error: string; message: string };
      expect(body.error).toBe('store_full');
      expect(body.message).toContain('memory limit');
      // Nothing half-written: no key was added (no run, no index entry, no job).
      expect(await admin.dbsize()).toBe(keysBefore);
      expect(await refusedFull()).toBe(1);
    } finally {
      await makeRoom();
    }
    const res = await post('full-1', 'FULL-1');
    expect(res.status).toBe(201);
    const { runId } = (await res.json()) as { runId: string };
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')).toBe('queued');
  });

  it("FleetClient's createRun is asked again after Retry-After until the store takes it", async () => {
    const client = new FleetClient({ url, token: PRODUCER_TOKEN, retry: { attempts: 10 } });
    const before = await refusedFull();
    await fill();
    let created: Promise<{ runId: string }>;
    try {
      created = client.createRun({ tenant: 'acme', agent: 'support', input: sampleTicket('FULL-2') });
      await until('a create refused for memory', 10_000, async () => (await refusedFull()) > before);
    } finally {
      await makeRoom();
    }
    const { runId } = await created;
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')).toBe('queued');
  });

  it('gives up with StoreUnavailable (code store_full) once its attempts are spent', async () => {
    const client = new FleetClient({ url, token: PRODUCER_TOKEN, retry: { attempts: 2 } });
    await fill();
    try {
      const err = await client
        .createRun({ tenant: 'acme', agent: 'support', input: sampleTicket('FULL-3') })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StoreUnavailable);
      expect(err).toMatchObject({ code: 'store_full', status: 503, retryAfterMs: 1000 });
    } finally {
      await makeRoom();
    }
  });
});
