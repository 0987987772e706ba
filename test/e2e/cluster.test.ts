/**
 * The fleet on a real Redis Cluster (3 masters): runs spread over 6 shards
 * (hash-tagged queues and run keys), a worker SIGKILLed mid-run, invariants checked;
 * the money counters' scripts (leases and batched settlements) on their own slot.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalCluster, type LocalCluster } from '../../testkit/cluster.js';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { spawnWorker } from '../../testkit/processes.js';
import { buildSpec } from '../../src/producer/intake.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { redisServerOnPath } from '../../testkit/embeddedRedis.js';
import { SpendBudget } from '../../src/budget/spend.js';

const RUNS = 200;
let cluster: LocalCluster;
let h: Harness;

describe.skipIf(!redisServerOnPath())('Redis Cluster', () => {
  beforeAll(async () => {
    cluster = await startLocalCluster(3);
    h = await createHarness('cluster', {
      REDIS_CLUSTER_NODES: cluster.nodes.join(','),
      SHARDS: '6',
      WORKER_CONCURRENCY: '20',
    });
  }, 60_000);
  afterAll(async () => {
    await h?.close();
    await cluster?.stop();
  });

  it(`runs ${RUNS} support-agent runs across shards, survives a SIGKILLed worker, no duplicate, none lost`, async () => {
    const runIds: string[] = [];
    for (let i = 0; i < RUNS; i++) {
      const spec = buildSpec(
        h.ctx,
        {
          tenant: 'acme',
          ticket: { ...sampleTicket(`CL-${i}`), customer: { email: `c${i}@example.com`, name: `C${i}` } },
        },
        Date.now(),
      );
      expect(await h.ctx.store.create(spec, Date.now())).toBe(true);
      runIds.push(spec.runId);
    }
    const shards = new Set(runIds.map((r) => h.ctx.keys.shardOf(r)));
    expect(shards.size).toBe(6);
    // A worker process that dies mid-run (at its third step, before the commit), then one that stays.
    const victim = await spawnWorker({
      ...h.env,
      CRASH_POINTS: 'before_commit@3',
      LOCK_DURATION_MS: '1000',
      STALLED_INTERVAL_MS: '500',
    });
    expect((await victim.exited).signal).toBe('SIGKILL');
    await h.startWorker();
    for (const runId of runIds) await h.waitForStatus(runId, ['completed'], 120_000);
    const counts = h.sandbox.counts();
    expect(counts.duplicates).toBe(0);
    expect(counts.byResource.tickets.records).toBe(RUNS);
    expect(counts.byResource.emails.records).toBe(RUNS);
    const ledger = new Ledger(h.ctx.redis, h.ctx.keys);
    for (const runId of runIds.slice(0, 50)) {
      const steps = (await h.ctx.store.transcript(runId)).filter((e) => e.kind === 'decision').map((e) => e.step);
      expect(steps).toEqual([1, 2, 3, 4, 5]);
      expect((await ledger.listForRun(runId)).every((a) => a.state === 'confirmed')).toBe(true);
    }
  }, 180_000);

  it('money: leases and batched settlements reach the {spend} slot, a limit refuses there', async () => {
    const spend = new SpendBudget(h.ctx.redis, h.ctx.keys, {
      MODEL_PRICES: [],
      TENANT_DAILY_COST: 5000,
      TENANT_MONTHLY_COST: 0,
      AGENT_DAILY_COST: 4000,
      FLEET_MONTHLY_COST: 0,
      SPEND_FLUSH_MS: 600_000,
      SPEND_LEASE_ATTEMPTS: 16,
    });
    const scope = { tenant: 'cl-money', agent: 'support', provider: 'p', model: 'm' };
    const now = Date.parse('2030-04-01T08:00:00Z');
    const first = await spend.reserve(scope, 3000, now);
    if (!('hold' in first)) throw new Error('first reservation refused');
    spend.settle(scope, 700, first.hold, now);
    await spend.close();
    const k = h.ctx.keys.spend('cl-money', 'support', '2030-04-01', '2030-04');
    expect(await h.ctx.redis.get(k.tenantDay)).toBe('700');
    expect(await h.ctx.redis.get(k.fleetMonth)).toBe('700');
    expect(await h.ctx.redis.hget(k.dayReport, 'cl-money support p/m')).toBe('700');
    expect(await spend.reserve(scope, 3500, now)).toEqual({
      stop: { kind: 'tenant_cost', reason: 'cost: support (agent today) used 700 + estimate 3500 > 4000 µ$' },
    });
    expect(await h.ctx.redis.get(k.tenantDay)).toBe('700');
    // Far from a limit a lease holds several attempts' estimates; the stop gives its rest back there.
    const leased = new SpendBudget(h.ctx.redis, h.ctx.keys, {
      MODEL_PRICES: [],
      TENANT_DAILY_COST: 1_000_000_000,
      TENANT_MONTHLY_COST: 0,
      AGENT_DAILY_COST: 0,
      FLEET_MONTHLY_COST: 0,
      SPEND_FLUSH_MS: 600_000,
      SPEND_LEASE_ATTEMPTS: 16,
    });
    const far = { ...scope, tenant: 'cl-lease' };
    const day = h.ctx.keys.spend('cl-lease', 'support', '2030-04-01', '2030-04').tenantDay;
    for (let i = 0; i < 3; i++) expect('hold' in (await leased.reserve(far, 1000, now))).toBe(true);
    expect(await h.ctx.redis.get(day)).toBe('16000');
    await leased.close();
    expect(await h.ctx.redis.get(day)).toBe('3000');
  });
});
