/**
 * Schedules as a tenant sees them: a cap per tenant and a minimum interval (a 4xx naming the field, nothing
 * written); a tenant lists, pauses, resumes and deletes its own schedules (another tenant's is a 404, as for runs;
 * operators see all); a tick fires only while the credential that made the schedule is still configured (a revoked
 * tenant token's schedule is paused `credential_revoked`, counted and logged, and starts no run).
 */
import { createHash } from 'node:crypto';
import type { Job } from 'bullmq';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createHarness, PRODUCER_TOKEN, sampleTicket, type Harness } from '../../testkit/harness.js';
import { createContext } from '../../src/server/buildContext.js';
import type { EngineContext } from '../../src/runs/engineContext.js';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/metrics/log.js';
import { newMetrics } from '../../src/metrics/metrics.js';
import {
  runTick,
  Schedules,
  scheduleViewSchema,
  startScheduleWorker,
  TICK_ATTEMPTS,
} from '../../src/producer/schedules.js';
import { until } from '../../testkit/until.js';

const OPERATOR_TOKEN = 'operator-token-for-tests';
const VIEWER_TOKEN = 'viewer-token-for-tests';
const ACME = 'acme-tenant-token';
const GLOBEX = 'globex-tenant-token';
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

let h: Harness & { url: string };
beforeAll(async () => {
  const viewer = [{ name: 'vic', tokenSha256: sha256(VIEWER_TOKEN), role: 'viewer', tenants: '*' }];
  const base = await createHarness('schedules', {
    OPERATOR_TOKEN,
    OPERATORS: JSON.stringify(viewer),
    TENANT_TOKENS: JSON.stringify({ acme: ACME, globex: GLOBEX }),
    SCHEDULES_MAX_PER_TENANT: '2',
    SCHEDULE_MIN_INTERVAL_MS: '60000',
  });
  const { url } = await base.startApi();
  h = Object.assign(base, { url });
});
afterAll(async () => {
  await h.close();
});
beforeEach(async () => {
  await h.ctx.redis.del(h.ctx.keys.schedules());
});

async function call(method: string, path: string, token: string, body?: unknown) {
  const res = await fetch(`${h.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : {}) as Record<string, unknown> };
}
const hourly = (tenant: string, n: number) => ({
  tenant,
  agent: 'support',
  cron: '0 * * * *',
  input: sampleTicket(`SCH-${tenant}-${n}`),
});
const ids = (body: Record<string, unknown>) =>
  (body.schedules as { tenant: string; id: string }[]).map((s) => `${s.tenant}/${s.id}`);

describe('limits', () => {
  it('a pattern that ticks more often than SCHEDULE_MIN_INTERVAL_MS is a 400 naming cron, nothing written', async () => {
    for (const cron of ['* * * * * *', '*/30 * * * * *', '0,30 * * * * *', '0,1 * * * * *']) {
      const r = await call('PUT', '/v1/schedules/fast', ACME, { ...hourly('acme', 1), cron });
      expect(r.status, cron).toBe(400);
      expect((r.body.fields as { path: string }[])[0]!.path).toBe('cron');
    }
    expect(await h.ctx.redis.hlen(h.ctx.keys.schedules())).toBe(0);
    // The setting's name is the producer's to see, not a tenant's.
    const fast = { ...hourly('acme', 1), cron: '* * * * * *' };
    expect(JSON.stringify((await call('PUT', '/v1/schedules/fast', ACME, fast)).body)).not.toContain('SCHEDULE_MIN');
    expect(JSON.stringify((await call('PUT', '/v1/schedules/fast', PRODUCER_TOKEN, fast)).body)).toContain(
      'SCHEDULE_MIN_INTERVAL_MS',
    );
    // Once a minute, and a daily pattern whose ticks are a minute apart across midnight, pass.
    expect(
      (await call('PUT', '/v1/schedules/minutely', ACME, { ...hourly('acme', 1), cron: '* * * * *' })).status,
    ).toBe(200);
    expect(
      (await call('PUT', '/v1/schedules/midnight', ACME, { ...hourly('acme', 2), cron: '0,59 0,23 * * *' })).status,
    ).toBe(200);
  });

  it('a tenant past SCHEDULES_MAX_PER_TENANT is refused naming tenant, nothing written; a replace still works', async () => {
    expect((await call('PUT', '/v1/schedules/a', ACME, hourly('acme', 1))).status).toBe(200);
    expect((await call('PUT', '/v1/schedules/b', ACME, hourly('acme', 2))).status).toBe(200);
    const over = await call('PUT', '/v1/schedules/c', ACME, hourly('acme', 3));
    expect(over.status).toBe(409);
    expect(over.body).toMatchObject({ error: 'schedule_limit', fields: [{ path: 'tenant' }] });
    expect(JSON.stringify(over.body)).not.toContain('SCHEDULES_MAX_PER_TENANT');
    const producer = await call('PUT', '/v1/schedules/c', PRODUCER_TOKEN, hourly('acme', 3));
    expect(producer.status).toBe(409);
    expect(JSON.stringify(producer.body)).toContain('SCHEDULES_MAX_PER_TENANT');
    expect(await h.ctx.redis.hexists(h.ctx.keys.schedules(), 'acme:c')).toBe(0);
    expect((await call('PUT', '/v1/schedules/b', ACME, { ...hourly('acme', 2), cron: '30 * * * *' })).status).toBe(200);
    // The cap is per tenant.
    expect((await call('PUT', '/v1/schedules/c', GLOBEX, hourly('globex', 1))).status).toBe(200);
  });
});

describe("a tenant's own schedules", () => {
  beforeEach(async () => {
    for (const [token, tenant] of [
      [ACME, 'acme'],
      [GLOBEX, 'globex'],
    ] as const)
      expect((await call('PUT', '/v1/schedules/nightly', token, hourly(tenant, 1))).status).toBe(200);
  });

  it('lists its own, never another tenant’s; operators and the producer see all', async () => {
    expect(ids((await call('GET', '/v1/schedules', ACME)).body)).toEqual(['acme/nightly']);
    expect((await call('GET', '/v1/schedules?tenant=globex', ACME)).body.schedules).toEqual([]);
    expect(ids((await call('GET', '/v1/schedules', OPERATOR_TOKEN)).body)).toEqual(['acme/nightly', 'globex/nightly']);
    expect(ids((await call('GET', '/v1/schedules', VIEWER_TOKEN)).body)).toHaveLength(2);
    const listed = (await call('GET', '/v1/schedules', ACME)).body.schedules as Record<string, unknown>[];
    // What proves the credential stays in Redis.
    expect(JSON.stringify(listed)).not.toMatch(/credential/);
    expect(listed[0]).toMatchObject({ createdBy: 'tenant', paused: false });
    // The shape /openapi.json gives it.
    expect(scheduleViewSchema.array().safeParse(listed).error).toBeUndefined();
  });

  it('pauses, resumes and deletes its own; another tenant’s is a 404 with nothing changed', async () => {
    expect((await call('POST', '/v1/schedules/globex/nightly/pause', ACME)).status).toBe(404);
    expect((await call('DELETE', '/v1/schedules/globex/nightly', ACME)).status).toBe(404);
    expect((await call('POST', '/v1/schedules/acme/nightly/pause', VIEWER_TOKEN)).status).toBe(403);
    const paused = await call('POST', '/v1/schedules/acme/nightly/pause', ACME);
    expect(paused).toMatchObject({ status: 200, body: { paused: true } });
    expect((await call('POST', '/v1/schedules/acme/nightly/resume', ACME)).body.paused).toBe(false);
    expect((await call('DELETE', '/v1/schedules/acme/nightly', ACME)).status).toBe(204);
    expect(ids((await call('GET', '/v1/schedules', OPERATOR_TOKEN)).body)).toEqual(['globex/nightly']);
  });
});

describe('a tick checks the credential that made the schedule', () => {
  const tickJob = (tenant: string, id: string, at: number) =>
    ({ data: { tenant, id }, opts: { prevMillis: at }, timestamp: at, delay: 0, id: `repeat:x:${at}` }) as Job;
  let revoked: EngineContext;
  beforeAll(async () => {
    // Another process of the same deployment after acme's token was removed from TENANT_TOKENS.
    const cfg = loadConfig({ ...h.env, TENANT_TOKENS: JSON.stringify({ globex: GLOBEX }) });
    revoked = await createContext(cfg, 'schedules-revoked', {
      log: createLogger('revoked', 'silent'),
      metrics: newMetrics(),
    });
  });
  afterAll(async () => {
    await revoked.close();
  });

  it("a revoked tenant token's schedule starts no run: paused credential_revoked, counted", async () => {
    expect((await call('PUT', '/v1/schedules/nightly', ACME, hourly('acme', 1))).status).toBe(200);
    expect((await call('PUT', '/v1/schedules/nightly', GLOBEX, hourly('globex', 1))).status).toBe(200);
    const schedules = new Schedules(revoked);
    try {
      expect(await runTick(revoked, schedules, tickJob('acme', 'nightly', 1_800_000_000_000))).toBe('revoked');
      expect(await schedules.get('acme', 'nightly')).toMatchObject({
        paused: true,
        pausedReason: 'credential_revoked',
      });
      const ticks = (await revoked.metrics.scheduleTicks.get()).values;
      expect(ticks.find((v) => v.labels.outcome === 'revoked')?.value).toBe(1);
      expect(ticks.find((v) => v.labels.outcome === 'started')).toBeUndefined();
      // globex's token is still configured: its tick starts a run.
      expect(await runTick(revoked, schedules, tickJob('globex', 'nightly', 1_800_000_000_000))).toMatch(/^r_/);
    } finally {
      await schedules.close();
    }
  });

  it("a rotated token no longer names the schedule's credential; resuming with the new token takes it over", async () => {
    expect((await call('PUT', '/v1/schedules/nightly', ACME, hourly('acme', 1))).status).toBe(200);
    const rotated = loadConfig({ ...h.env, TENANT_TOKENS: JSON.stringify({ acme: 'acme-rotated-token' }) });
    const ctx2 = await createContext(rotated, 'schedules-rotated', {
      log: createLogger('rotated', 'silent'),
      metrics: newMetrics(),
    });
    const schedules = new Schedules(ctx2);
    try {
      expect(await runTick(ctx2, schedules, tickJob('acme', 'nightly', 1_800_000_060_000))).toBe('revoked');
      await schedules.setPaused('acme', 'nightly', false, { kind: 'tenant', token: 'acme-rotated-token' });
      expect(await runTick(ctx2, schedules, tickJob('acme', 'nightly', 1_800_000_120_000))).toMatch(/^r_/);
    } finally {
      await schedules.close();
      await ctx2.close();
    }
  });
});

describe('a tick that throws', () => {
  it('is tried again, then counted failed and logged: its run was never started', async () => {
    const schedules = new Schedules(h.ctx);
    // A definition that no longer parses: every attempt of its tick throws.
    await h.ctx.redis.hset(h.ctx.keys.schedules(), 'acme:broken', '{"not":"a schedule"}');
    const count = async (outcome: string) =>
      (await h.ctx.metrics.scheduleTicks.get()).values.find((v) => v.labels.outcome === outcome)?.value ?? 0;
    const [retried, failed] = [await count('retried'), await count('failed')];
    const errors = vi.spyOn(h.ctx.log, 'error');
    const worker = startScheduleWorker(h.ctx, schedules);
    try {
      await schedules.queue.add(
        'tick',
        { tenant: 'acme', id: 'broken' },
        { attempts: 2, backoff: { type: 'fixed', delay: 10 }, removeOnFail: true },
      );
      await until('the tick failed on its last attempt', 10_000, async () => (await count('failed')) === failed + 1);
      expect(await count('retried')).toBe(retried + 1);
      const logged = errors.mock.calls.map(
        ([fields]) => fields as { code?: string; tenant?: string; schedule?: string },
      );
      expect(logged).toContainEqual(
        expect.objectContaining({ code: 'schedule_tick_failed', tenant: 'acme', schedule: 'broken' }),
      );
    } finally {
      errors.mockRestore();
      await worker.close();
      await schedules.close();
    }
  });

  it('ticks are made with attempts and a backoff (a retry starts the same run at most once: its idempotency key)', async () => {
    const schedules = new Schedules(h.ctx);
    try {
      expect((await call('PUT', '/v1/schedules/retrying', ACME, hourly('acme', 1))).status).toBe(200);
      const scheduler = await schedules.queue.getJobScheduler('acme:retrying');
      expect(scheduler?.template?.opts).toMatchObject({ attempts: TICK_ATTEMPTS, backoff: { type: 'exponential' } });
    } finally {
      await schedules.close();
    }
  });
});
