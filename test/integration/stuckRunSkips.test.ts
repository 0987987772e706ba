/**
 * The stuck-run sweep walks a shard's run index in batches: a run record it cannot read or decode is skipped, named
 * (`stuck_run_skipped`) and counted (`agent_stuck_run_sweep_failures_total{stage="undecodable_run"}`), and the rest
 * of its batch is still checked. A shard whose walk fails is counted (`stage="shard"`) and makes the reconciler's
 * sweep `failed` (`agent_reconciler_sweeps_total`, alert AgentReconcilerFailing). Before, one such record hid every
 * stuck run of its shard, and a failed shard was a warning line under a sweep reported done.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Reconciler } from '../../src/ledger/reconciler.js';
import { buildSpec } from '../../src/producer/intake.js';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { final } from '../../testkit/turns.js';
import { until } from '../../testkit/until.js';

let h: Harness;
beforeAll(async () => {
  h = await createHarness('stuckrunskips');
});
afterAll(async () => {
  await h.close();
});

const counter = async (stage: string) =>
  (await h.ctx.metrics.stuckRunSweepFailures.get()).values
    .filter((v) => v.labels.stage === stage)
    .reduce((n, v) => n + v.value, 0);
const sweeps = async (outcome: string) =>
  (await h.ctx.metrics.reconcilerSweeps.get()).values.find((v) => v.labels.outcome === outcome)?.value ?? 0;

describe('the stuck-run sweep, one run at a time', () => {
  it('a run record that does not decode, or cannot be read, leaves the stuck run of its batch settled', async () => {
    const spec = buildSpec(
      h.ctx,
      { tenant: 'acme', ticket: sampleTicket(`SK-${Date.now()}`), agent: { model: 'scripted', script: [final] } },
      Date.now(),
    );
    await h.ctx.store.create(spec, Date.now());
    const shard = h.ctx.keys.shardOf(spec.runId);
    const jobId = (await h.ctx.store.readState(spec.runId))!.jobId;
    // Its step job lost (a failover), no worker: the sweep ends the queued run job_missing.
    await h.ctx.redis.del(h.ctx.keys.jobHash(shard, jobId));
    // At the head of the same shard's index: a status no release writes, and a run key of the wrong type.
    const undecodable = `r_undecodable_${Date.now()}`;
    await h.ctx.redis.hset(h.ctx.keys.run(undecodable).run, { status: 'not_a_status', jobId: 'x', updatedAt: '1' });
    const wrongType = `r_wrongtype_${Date.now()}`;
    await h.ctx.redis.set(h.ctx.keys.run(wrongType).run, 'not a hash');
    await h.ctx.redis.zadd(h.ctx.keys.runIndex(shard), 0, undecodable, 0, wrongType);

    const error = vi.spyOn(h.ctx.log, 'error');
    const report = await new Reconciler(h.ctx, 'reconciler:skips').sweep(Date.now() + 3600_000);
    const skipped = error.mock.calls
      .map(([fields]) => fields as Record<string, unknown>)
      .filter((f) => f.code === 'stuck_run_skipped')
      .map((f) => f.runId);
    error.mockRestore();

    expect(await h.ctx.redis.hget(h.ctx.keys.run(spec.runId).run, 'status')).toBe('needs_human');
    expect(await h.ctx.redis.hget(h.ctx.keys.run(spec.runId).run, 'reason')).toBe('job_missing');
    expect(report.stuckRuns).toMatchObject({ settled: 1, skipped: 2, failedShards: 0 });
    expect(await counter('undecodable_run')).toBe(2);
    expect(skipped.sort()).toEqual([undecodable, wrongType].sort());
    await h.ctx.redis.zrem(h.ctx.keys.runIndex(shard), undecodable, wrongType);
  });

  it("a shard whose walk fails is counted and makes the reconciler's sweep failed", async () => {
    const failedBefore = await sweeps('failed');
    const doneBefore = await sweeps('done');
    // The first read of a shard's run index refused (a store that stops answering mid-sweep).
    const zrange = vi.spyOn(h.ctx.redis, 'zrange').mockRejectedValueOnce(new Error('LOADING Redis is loading'));
    const r = new Reconciler(h.ctx, 'reconciler:skips-shard');
    try {
      r.start();
      await until(
        'a sweep counted',
        10_000,
        async () => (await sweeps('failed')) + (await sweeps('done')) > failedBefore + doneBefore,
      );
    } finally {
      await r.stop();
      zrange.mockRestore();
    }
    expect(await sweeps('failed')).toBe(failedBefore + 1);
    expect(await sweeps('done')).toBe(doneBefore);
    expect(await counter('shard')).toBe(1);
  });
});
