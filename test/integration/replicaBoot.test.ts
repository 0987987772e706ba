/**
 * REDIS_MIN_REPLICAS against the replicas a master really has (a master + replica redis-server pair): more required
 * than connected is refused at boot naming both; replicas with the setting unset are refused in production unless it
 * is set to 0, warned about otherwise; and a 503 for a write the replicas did not acknowledge names that cause, not a
 * failover.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { createContext } from '../../src/server/buildContext.js';
import { connectedReplicas, replicaProblem } from '../../src/server/replicaCheck.js';
import { createHarness, PRODUCER_TOKEN, sampleTicket } from '../../testkit/harness.js';
import { startEmbeddedRedis, type EmbeddedRedis } from '../../testkit/embeddedRedis.js';
import { uniquePrefix } from '../../testkit/keyPrefix.js';
import { until } from '../../testkit/until.js';

let master: EmbeddedRedis;
let replica: EmbeddedRedis;
beforeAll(async () => {
  master = await startEmbeddedRedis();
  replica = await startEmbeddedRedis({ extraArgs: ['--replicaof', '127.0.0.1', String(master.port)] });
  const probe = new Redis(master.url);
  await until('the replica connected', 20_000, async () => (await connectedReplicas(probe)) === 1, 100);
  probe.disconnect();
}, 60_000);
afterAll(async () => {
  await replica?.stop();
  await master?.stop();
});

const env = (extra: Record<string, string>) => ({
  REDIS_URL: master.url,
  KEY_PREFIX: uniquePrefix('replboot'),
  LOG_LEVEL: 'silent',
  ...extra,
});

describe('REDIS_MIN_REPLICAS at boot', () => {
  it('more replicas required than connected: refused at boot, naming both numbers', async () => {
    const err = await createContext(loadConfig(env({ REDIS_MIN_REPLICAS: '2' })), 'replboot').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toContain('REDIS_MIN_REPLICAS=2');
    expect((err as Error).message).toContain('1 connected replica');
    const ok = await createContext(loadConfig(env({ REDIS_MIN_REPLICAS: '1' })), 'replboot');
    await ok.close();
  });

  it('replicas with REDIS_MIN_REPLICAS unset: refused in production unless 0 is set, warned about otherwise', () => {
    const unset = { REDIS_MIN_REPLICAS: 0 };
    expect(replicaProblem({ ...unset, APP_MODE: 'production' }, false, 1)).toMatchObject({ refuse: true });
    expect(replicaProblem({ ...unset, APP_MODE: 'production' }, false, 1)!.message).toContain(
      'REDIS_MIN_REPLICAS is unset',
    );
    expect(replicaProblem({ ...unset, APP_MODE: 'production' }, true, 1)).toBeUndefined();
    expect(replicaProblem({ ...unset, APP_MODE: 'development' }, false, 1)).toMatchObject({ refuse: false });
    expect(replicaProblem({ ...unset, APP_MODE: 'production' }, false, 0)).toBeUndefined();
  });

  it('a development boot on a replicated store with the setting unset warns, naming the setting', async () => {
    const lines: string[] = [];
    const log = { warn: (o: { code: string }, m: string) => lines.push(`${o.code} ${m}`) };
    const { checkReplicas } = await import('../../src/server/replicaCheck.js');
    const redis = new Redis(master.url);
    try {
      await checkReplicas(loadConfig(env({})), redis, log as never);
    } finally {
      redis.disconnect();
    }
    expect(lines).toEqual([expect.stringContaining('redis_replicas_unacknowledged')]);
    expect(lines[0]).toContain('REDIS_MIN_REPLICAS');
  });

  it('a write the replicas did not acknowledge answers 503 naming that cause, not a failover', async () => {
    const h = await createHarness('replboot503', {
      REDIS_URL: master.url,
      REDIS_MIN_REPLICAS: '1',
      REDIS_REPLICA_WAIT_MS: '100',
    });
    try {
      const { url } = await h.startApi();
      await replica.kill();
      const probe = new Redis(master.url);
      await until('the replica gone', 20_000, async () => (await connectedReplicas(probe)) === 0, 100);
      probe.disconnect();
      const res = await fetch(`${url}/v1/runs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${PRODUCER_TOKEN}` },
        body: JSON.stringify({ tenant: 'acme', ticket: sampleTicket('REPL-1') }),
      });
      expect(res.status).toBe(503);
      const body = (await res.json()) as { error: string; message: string };
      expect(body.error).toBe('store_unavailable');
      expect(body.message).toContain('0 of the 1 replicas REDIS_MIN_REPLICAS requires');
      expect(body.message).not.toContain('failing over');
    } finally {
      await replica.restart();
      await h.close();
    }
  }, 60_000);
});
