/**
 * Liveness fails once the store client has given up reconnecting (ioredis `end` without the process closing it: seen
 * with a Sentinel client after a failover). Readiness alone would keep such a process in rotation for ever, answering
 * 503 to every request; a failing /healthz has the orchestrator restart it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from '../../testkit/harness.js';
import { startOpsServer } from '../../src/http/opsServer.js';
import { storeEnded } from '../../src/store/connect.js';

let h: Harness;
beforeAll(async () => {
  h = await createHarness('liveness');
});
afterAll(async () => {
  await h.close().catch(() => {});
});

describe('liveness', () => {
  it('the API and the ops port answer /healthz 503 once the store client ended on its own', async () => {
    const { url } = await h.startApi();
    const ops = await startOpsServer({
      port: 0,
      host: '127.0.0.1',
      registry: h.ctx.metrics.registry,
      isReady: () => true,
      isAlive: () => !storeEnded(h.ctx.redis),
      metricsAccess: h.cfg,
    });
    const opsUrl = `http://127.0.0.1:${ops.port}`;
    try {
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
      expect((await fetch(`${opsUrl}/healthz`)).status).toBe(200);
      // What ioredis does when it stops reconnecting: the client ends.
      const ended = new Promise((r) => h.ctx.redis.once('end', r));
      h.ctx.redis.disconnect();
      await ended;
      expect(storeEnded(h.ctx.redis)).toBe(true);
      const api = await fetch(`${url}/healthz`);
      expect(api.status).toBe(503);
      expect(await api.json()).toEqual({ ok: false });
      expect((await fetch(`${opsUrl}/healthz`)).status).toBe(503);
    } finally {
      ops.server.close();
    }
  });
});
