/**
 * Spend settlements in batches (src/budget/spend.ts, settleSpend-1.lua, leaseSpend-1.lua): a worker without a
 * money limit makes no Redis call for money per attempt and sends its attempts' spend in one batch (here at its
 * graceful stop); a batch is applied once, whatever is sent again; a refused lease takes nothing on any
 * counter; a limit refuses only once the worker's own settlements are in; a reservation comes off the day it was
 * taken on.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { buildSpec } from '../../src/producer/intake.js';
import { readBudget } from '../../src/store/runRecord.js';
import { settleSpend } from '../../src/store/calls/settleSpend.js';
import { leaseSpend } from '../../src/store/calls/leaseSpend.js';
import { SpendBudget, type SpendScope } from '../../src/budget/spend.js';

let h: Harness;
beforeAll(async () => {
  // A batch waits ten minutes: only the stop sends it.
  h = await createHarness('spendbatch', { SPEND_FLUSH_MS: '600000' });
});
afterAll(async () => {
  await h.close();
});

const usage = { promptTokens: 500, completionTokens: 100 };
const script = [
  ...Array.from({ length: 3 }, () => ({ toolCalls: [{ name: 'read_ticket', args: {} }], usage, transientFailures: 0 })),
  { toolCalls: [], final: 'done', usage, transientFailures: 0 },
];

async function start(tenant: string, id: string): Promise<string> {
  const spec = buildSpec(h.ctx, { tenant, ticket: sampleTicket(id), agent: { model: 'scripted', script } }, Date.now());
  await h.ctx.store.create(spec, Date.now());
  return spec.runId;
}

async function marks(): Promise<string[]> {
  return h.ctx.redis.keys(`${h.ctx.keys.spendMark('*', 0).slice(0, -2)}*`);
}

/** A worker's money budget with only a tenant's daily limit, its batches held in memory (sent when a test says so). */
function tenantDayBudget(limit: number): SpendBudget {
  return new SpendBudget(h.ctx.redis, h.ctx.keys, {
    MODEL_PRICES: [],
    TENANT_DAILY_COST: limit,
    TENANT_MONTHLY_COST: 0,
    AGENT_DAILY_COST: 0,
    FLEET_MONTHLY_COST: 0,
    SPEND_FLUSH_MS: 600_000,
    SPEND_LEASE_ATTEMPTS: 16,
  });
}

describe('spend settlements in batches', () => {
  it('a worker without a money limit sends no spend per attempt: one batch at its stop holds all of it', async () => {
    const worker = await h.startWorker();
    const runs = [await start('batcher', 'SB-1'), await start('batcher', 'SB-2')];
    for (const run of runs) expect(await h.waitForStatus(run, ['completed', 'failed'])).toBe('completed');
    const charged = (await Promise.all(runs.map((r) => readBudget(h.ctx.redis, h.ctx.keys, r, ['costUsed'])))).reduce(
      (n, b) => n + b.costUsed,
      0,
    );
    // At the scripted model's nominal price ($1 in, $2 out per million): 700 µ$ a step, eight steps.
    expect(charged).toBe(8 * 700);
    const day = new Date().toISOString().slice(0, 10);
    const k = h.ctx.keys.spend('batcher', 'support', day, day.slice(0, 7));
    expect(await h.ctx.redis.exists(k.tenantDay, k.dayReport, k.fleetMonth)).toBe(0);
    expect(await marks()).toEqual([]);

    await worker.stop();
    expect(await marks()).toHaveLength(1);
    for (const key of [k.tenantDay, k.tenantMonth, k.agentDay, k.fleetMonth])
      expect(Number(await h.ctx.redis.get(key))).toBe(charged);
    expect(await h.ctx.redis.hgetall(k.dayReport)).toEqual({ 'batcher support scripted/scripted': String(charged) });
    expect(await h.ctx.redis.hgetall(k.monthReport)).toEqual({ 'batcher support scripted/scripted': String(charged) });
    // Each key was given its ttl when the batch created it.
    for (const key of [k.tenantDay, k.fleetMonth, k.dayReport, k.monthReport])
      expect(await h.ctx.redis.pttl(key)).toBeGreaterThan(0);
    // The day's report outlives its counters: the console's spend page plots 31 days of them.
    expect(await h.ctx.redis.pttl(k.dayReport)).toBeGreaterThan(31 * 24 * 3600_000);
  });

  it('a batch is applied once: the same command sent again changes nothing', async () => {
    const p = h.ctx.keys.spend('once', 'a', '2030-01-01', '2030-01').tenantDay;
    const batch = {
      mark: h.ctx.keys.spendMark('writer-once', 1),
      markTtlMs: 60_000,
      counters: [{ key: p, delta: 250, ttlMs: 60_000 }],
      reports: [{ key: `${p}:report`, field: 'once a m/x', cost: 250, ttlMs: 60_000 }],
    };
    expect(await settleSpend(h.ctx.redis, batch)).toBe(true);
    expect(await settleSpend(h.ctx.redis, batch)).toBe(false);
    expect(await h.ctx.redis.get(p)).toBe('250');
    expect(await h.ctx.redis.hget(`${p}:report`, 'once a m/x')).toBe('250');
    // Another batch (another mark) is applied.
    await settleSpend(h.ctx.redis, { ...batch, mark: h.ctx.keys.spendMark('writer-once', 2) });
    expect(await h.ctx.redis.get(p)).toBe('500');
  });

  it('a refused lease takes nothing on any counter, and gives back what it was given all the same', async () => {
    const k = h.ctx.keys.spend('refused', 'a', '2030-01-02', '2030-01');
    await h.ctx.redis.set(k.agentDay, 900);
    await h.ctx.redis.set(k.fleetMonth, 500);
    const counters = [
      { key: k.tenantDay, limit: 10_000, ttlMs: 60_000 },
      { key: k.agentDay, limit: 1000, ttlMs: 60_000 },
      { key: k.fleetMonth, limit: 10_000, ttlMs: 60_000 },
    ];
    const ask = { back: 0, need: 200, want: 200, share: 8, counters };
    expect(await leaseSpend(h.ctx.redis, ask)).toEqual({ refused: { index: 1, used: 900 } });
    expect(await h.ctx.redis.exists(k.tenantDay)).toBe(0);
    expect(await h.ctx.redis.get(k.agentDay)).toBe('900');
    expect(await h.ctx.redis.get(k.fleetMonth)).toBe('500');
    // A previous lease's rest of 50 given back with a refused one: off every counter, the refusal's total after it.
    await h.ctx.redis.set(k.agentDay, 950);
    await h.ctx.redis.set(k.fleetMonth, 550);
    expect(await leaseSpend(h.ctx.redis, { ...ask, back: 50 })).toEqual({ refused: { index: 1, used: 900 } });
    expect(await h.ctx.redis.get(k.agentDay)).toBe('900');
    expect(await h.ctx.redis.get(k.fleetMonth)).toBe('500');
    // A counter the give-back created keeps a ttl (it does not stay forever below 0).
    expect(await h.ctx.redis.get(k.tenantDay)).toBe('-50');
    expect(await h.ctx.redis.pttl(k.tenantDay)).toBeGreaterThan(0);
    expect(await leaseSpend(h.ctx.redis, { ...ask, need: 100, want: 100, counters: [counters[1]!] })).toEqual({
      amount: 100,
    });
    expect(await h.ctx.redis.get(k.agentDay)).toBe('1000');
  });

  it("a limit refuses a reservation only once the worker's own settlements are on the counters", async () => {
    const spend = tenantDayBudget(10_000);
    const scope: SpendScope = { tenant: 'own', agent: 'a', provider: 'p', model: 'm' };
    const now = Date.parse('2030-03-01T12:00:00Z');
    const first = await spend.reserve(scope, 6000, now);
    if (!('hold' in first)) throw new Error('first reservation refused');
    // The attempt cost 1,000 of its 6,000: the settlement waits in memory, the counter still holds 6,000.
    spend.settle(scope, 1000, first.hold, now);
    const k = h.ctx.keys.spend('own', 'a', '2030-03-01', '2030-03');
    expect(await h.ctx.redis.get(k.tenantDay)).toBe('6000');
    // 6,000 + 6,000 would pass the 10,000; 1,000 + 6,000 does not: the settlement is sent, the reservation taken.
    expect('hold' in (await spend.reserve(scope, 6000, now))).toBe(true);
    expect(await h.ctx.redis.get(k.tenantDay)).toBe('7000');
    const third = await spend.reserve(scope, 6000, now);
    expect(third).toEqual({
      stop: { kind: 'tenant_cost', reason: 'cost: own (tenant today) used 7000 + estimate 6000 > 10000 µ$' },
    });
    await spend.close();
  });

  it('a reservation made before midnight and settled after comes off the day it was taken on', async () => {
    const spend = tenantDayBudget(1_000_000);
    const scope: SpendScope = { tenant: 'midnight', agent: 'a', provider: 'p', model: 'm' };
    const before = Date.parse('2030-02-01T23:59:59.900Z');
    const after = Date.parse('2030-02-02T00:00:00.100Z');
    const reserved = await spend.reserve(scope, 1000, before);
    if (!('hold' in reserved)) throw new Error('reservation refused');
    spend.settle(scope, 300, reserved.hold, after);
    // An attempt of the first day settled after one of the second (the worker names each day's keys afresh).
    spend.settle(scope, 50, undefined, before + 50);
    await spend.close();
    const first = h.ctx.keys.spend('midnight', 'a', '2030-02-01', '2030-02');
    const second = h.ctx.keys.spend('midnight', 'a', '2030-02-02', '2030-02');
    expect(Number(await h.ctx.redis.get(first.tenantDay))).toBe(50);
    expect(Number(await h.ctx.redis.get(second.tenantDay))).toBe(300);
    expect(await h.ctx.redis.hget(second.dayReport, 'midnight a p/m')).toBe('300');
    expect(await h.ctx.redis.hget(first.dayReport, 'midnight a p/m')).toBe('50');
    expect(Number(await h.ctx.redis.get(second.fleetMonth))).toBe(350);
  });
});
