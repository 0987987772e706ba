/**
 * The reconciler's election lock: a lock another reconciler holds is no news (it sweeps), but a lock that could not be
 * asked for (a store refusing writes: out of memory under noeviction, a read-only replica after a failover) means
 * nobody may be sweeping, and every "(the sweep will)" of the engine waits on that sweep. Redlock ends both with the
 * same error; the reconciler tells them apart by the store errors met on the way, counts and logs the second.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startEmbeddedRedis, type EmbeddedRedis } from '../../testkit/embeddedRedis.js';
import { createHarness, type Harness } from '../../testkit/harness.js';
import { Reconciler } from '../../src/ledger/reconciler.js';
import { until } from '../../testkit/until.js';

let server: EmbeddedRedis;
let h: Harness;

beforeAll(async () => {
  server = await startEmbeddedRedis();
  h = await createHarness('reconcilerlock', { REDIS_URL: server.url, RECONCILER_SWEEP_MS: '50' });
}, 30_000);
afterAll(async () => {
  await h?.close().catch(() => {});
  await server?.stop();
});

const sweeps = async (outcome: string) =>
  (await h.ctx.metrics.reconcilerSweeps.get()).values.find((v) => v.labels.outcome === outcome)?.value ?? 0;
const codes = (spy: { mock: { calls: unknown[][] } }) =>
  spy.mock.calls.map(([fields]) => (fields as { code?: string }).code);

describe("the reconciler's election lock", () => {
  it('held by another reconciler: no sweep here, nothing said; refused by the store: counted and logged', async () => {
    const warn = vi.spyOn(h.ctx.log, 'warn');
    const r = new Reconciler(h.ctx, 'reconciler:lock-test');
    try {
      r.start();
      await until('a sweep done', 10_000, async () => (await sweeps('done')) > 0);
      // Another reconciler holds the lock.
      await r.stop();
      await h.ctx.redis.set(h.ctx.keys.reconcilerLeader(), 'another', 'PX', 60_000);
      const done = await sweeps('done');
      const held = new Reconciler(h.ctx, 'reconciler:lock-test-2');
      held.start();
      await new Promise((res) => setTimeout(res, 300));
      await held.stop();
      expect(await sweeps('done')).toBe(done);
      expect(await sweeps('lock_failed')).toBe(0);
      expect(codes(warn)).not.toContain('reconciler_lock_failed');
      // The store refuses writes: the lock cannot be asked for.
      await h.ctx.redis.del(h.ctx.keys.reconcilerLeader());
      await h.ctx.redis.config('SET', 'maxmemory', '1');
      const refused = new Reconciler(h.ctx, 'reconciler:lock-test-3');
      refused.start();
      try {
        await until('a lock failure counted', 10_000, async () => (await sweeps('lock_failed')) > 0);
      } finally {
        await h.ctx.redis.config('SET', 'maxmemory', '0');
        await refused.stop();
      }
      expect(codes(warn)).toContain('reconciler_lock_failed');
    } finally {
      warn.mockRestore();
      await r.stop();
    }
  });
});
