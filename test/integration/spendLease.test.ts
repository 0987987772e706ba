/**
 * Money leased per worker (src/budget/spend.ts, leaseSpend-1.lua): with a money limit in force a worker takes a lease
 * of several attempts' estimates with one script and draws each attempt's estimate from it in memory, so its
 * attempts make no Redis request of their own (counted with MONITOR); what it does not draw goes back with its next
 * batch or at its stop; a lease takes at most an eighth of the room left, so near a limit workers holding leases do
 * not starve one another; a refusal is exact for the worker's own attempts (its leases given back first).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { buildSpec } from '../../src/producer/intake.js';
import { readBudget } from '../../src/store/runRecord.js';
import { SpendBudget, type SpendOptions, type SpendScope } from '../../src/budget/spend.js';
import { until } from '../../testkit/until.js';
import { captureCommands } from '../../bench/lib/monitorTrace.js';

let h: Harness;
beforeAll(async () => {
  // A batch waits ten minutes: only the stop sends it.
  h = await createHarness('spendlease', {
    TENANT_DAILY_COST: '1000000000',
    SPEND_FLUSH_MS: '600000',
    SPEND_LEASE_ATTEMPTS: '16',
  });
});
afterAll(async () => {
  await h.close();
});

/** Watches the server (MONITOR): `calls()` stops and gives the requests that named `key` first of their keys. */
async function watch(key: string): Promise<{ calls: () => Promise<string[][]> }> {
  const url = new URL(h.env.REDIS_URL!);
  const capture = await captureCommands(Number(url.port), url.hostname);
  return {
    calls: async () =>
      (await capture.stop())
        .map((c) => c.args.map((a) => a.toString('latin1')))
        // EVALSHA <sha> <numkeys> <first key>: a lease names its first counter there, a batch its mark.
        .filter((args) => /^eval/i.test(args[0]!) && args[3] === key),
  };
}

const budget = (o: Partial<SpendOptions>) =>
  new SpendBudget(h.ctx.redis, h.ctx.keys, {
    MODEL_PRICES: [],
    TENANT_DAILY_COST: 0,
    TENANT_MONTHLY_COST: 0,
    AGENT_DAILY_COST: 0,
    FLEET_MONTHLY_COST: 0,
    SPEND_FLUSH_MS: 600_000,
    SPEND_LEASE_ATTEMPTS: 16,
    ...o,
  });

const usage = { promptTokens: 500, completionTokens: 100 };
const script = [
  ...Array.from({ length: 3 }, () => ({ toolCalls: [{ name: 'read_ticket', args: {} }], usage, transientFailures: 0 })),
  { toolCalls: [], final: 'done', usage, transientFailures: 0 },
];

describe('money leased per worker', () => {
  it("a worker's attempts draw from one lease: no request of their own; the rest given back at its stop", async () => {
    const day = new Date().toISOString().slice(0, 10);
    const k = h.ctx.keys.spend('leaser', 'support', day, day.slice(0, 7));
    const seen = await watch(k.tenantDay);
    const worker = await h.startWorker();
    const runs: string[] = [];
    // One run after the other: two first attempts at once could each find no lease and ask one.
    for (const id of ['SL-1', 'SL-2']) {
      const spec = buildSpec(
        h.ctx,
        { tenant: 'leaser', ticket: sampleTicket(id), agent: { model: 'scripted', script } },
        Date.now(),
      );
      await h.ctx.store.create(spec, Date.now());
      runs.push(spec.runId);
      expect(await h.waitForStatus(spec.runId, ['completed', 'failed'])).toBe('completed');
    }
    // Eight attempts, one lease of sixteen estimates: one call took it, none drew from it.
    expect(await seen.calls()).toHaveLength(1);
    const leased = Number(await h.ctx.redis.get(k.tenantDay));
    expect(leased).toBeGreaterThan(0);

    await worker.stop();
    const charged = (await Promise.all(runs.map((r) => readBudget(h.ctx.redis, h.ctx.keys, r, ['costUsed'])))).reduce(
      (n, b) => n + b.costUsed,
      0,
    );
    expect(charged).toBe(8 * 700);
    // The stop's batch settled the attempts and gave the undrawn rest back: the day holds what was spent, no more.
    expect(Number(await h.ctx.redis.get(k.tenantDay))).toBe(charged);
  });

  it('a lease covers several attempts; the next gives the rest back in its own call, sized to what was drawn', async () => {
    const spend = budget({ TENANT_DAILY_COST: 1_000_000_000, SPEND_LEASE_ATTEMPTS: 4 });
    const scope: SpendScope = { tenant: 'draws', agent: 'a', provider: 'p', model: 'm' };
    const now = Date.parse('2030-05-01T12:00:00Z');
    const k = h.ctx.keys.spend('draws', 'a', '2030-05-01', '2030-05');
    const seen = await watch(k.tenantDay);
    for (let i = 0; i < 4; i++) expect('hold' in (await spend.reserve(scope, 1000, now))).toBe(true);
    expect(await seen.calls()).toHaveLength(1);
    const next = await watch(k.tenantDay);
    expect(await h.ctx.redis.get(k.tenantDay)).toBe('4000');
    // 900 left of the second lease after a 3,100 draw; the third gives those 900 back in its own call, and asks what
    // the worker drew since its last batch (7,100), more than 4 estimates.
    expect('hold' in (await spend.reserve(scope, 1000, now))).toBe(true);
    expect('hold' in (await spend.reserve(scope, 2100, now))).toBe(true);
    expect(await h.ctx.redis.get(k.tenantDay)).toBe('8000');
    expect('hold' in (await spend.reserve(scope, 1000, now))).toBe(true);
    expect(await next.calls()).toHaveLength(2);
    expect(await h.ctx.redis.get(k.tenantDay)).toBe(String(8000 - 900 + 7100));
    // The stop gives the lease's rest back; the seven attempts in flight keep their draws.
    await spend.close();
    expect(await h.ctx.redis.get(k.tenantDay)).toBe(String(5 * 1000 + 2100 + 1000));
  });

  it("a lease's undrawn rest goes back with the next batch, within SPEND_FLUSH_MS, with no settlement to send", async () => {
    const spend = budget({ TENANT_DAILY_COST: 1_000_000_000, SPEND_LEASE_ATTEMPTS: 10, SPEND_FLUSH_MS: 50 });
    const scope: SpendScope = { tenant: 'rest', agent: 'a', provider: 'p', model: 'm' };
    const now = Date.parse('2030-05-02T12:00:00Z');
    const k = h.ctx.keys.spend('rest', 'a', '2030-05-02', '2030-05');
    const reserved = await spend.reserve(scope, 1000, now);
    if (!('hold' in reserved)) throw new Error('refused');
    expect(await h.ctx.redis.get(k.tenantDay)).toBe('10000');
    // The attempt is still in flight: its draw stays counted, the other nine estimates come back.
    await until('the undrawn rest given back', 5000, async () => (await h.ctx.redis.get(k.tenantDay)) === '1000');
    spend.settle(scope, 300, reserved.hold, now);
    await spend.close();
    expect(await h.ctx.redis.get(k.tenantDay)).toBe('300');
  });

  it('near a limit a lease is one estimate: eight workers with room for eight estimates all get theirs', async () => {
    const now = Date.parse('2030-05-03T12:00:00Z');
    const k = h.ctx.keys.spend('eight', 'a', '2030-05-03', '2030-05');
    const scope: SpendScope = { tenant: 'eight', agent: 'a', provider: 'p', model: 'm' };
    // Far from it, a lease is an eighth of the room: 80,000 of room leases 10,000, not the 16 x 1,000 asked.
    const far = budget({ TENANT_DAILY_COST: 88_000 });
    await far.reserve(scope, 1000, now);
    expect(await h.ctx.redis.get(k.tenantDay)).toBe('11000');
    await h.ctx.redis.set(k.tenantDay, 80_000);
    const workers = Array.from({ length: 8 }, () => budget({ TENANT_DAILY_COST: 88_000 }));
    const answers = await Promise.all(workers.map((w) => w.reserve(scope, 1000, now)));
    expect(answers.every((a) => 'hold' in a)).toBe(true);
    expect(await h.ctx.redis.get(k.tenantDay)).toBe('88000');
    expect(await budget({ TENANT_DAILY_COST: 88_000 }).reserve(scope, 1000, now)).toEqual({
      stop: { kind: 'tenant_cost', reason: 'cost: eight (tenant today) used 88000 + estimate 1000 > 88000 µ$' },
    });
  });

  it("a refusal is exact for the worker's own attempts: its leases given back first", async () => {
    const spend = budget({ TENANT_DAILY_COST: 20_000, AGENT_DAILY_COST: 1_000_000 });
    const scope: SpendScope = { tenant: 'exact', agent: 'a', provider: 'p', model: 'm' };
    const other: SpendScope = { ...scope, agent: 'b' };
    const now = Date.parse('2030-05-04T12:00:00Z');
    const k = h.ctx.keys.spend('exact', 'a', '2030-05-04', '2030-05');
    // A lease on another agent's counters holds room on the same tenant day.
    expect('hold' in (await spend.reserve(other, 1000, now))).toBe(true);
    let held = 1;
    while ('hold' in (await spend.reserve(scope, 1000, now))) held++;
    // Twenty attempts in flight hold the whole day, and the refusal left no lease of this worker counted.
    expect(held).toBe(20);
    expect(await h.ctx.redis.get(k.tenantDay)).toBe('20000');
    await spend.close();
  });
});
