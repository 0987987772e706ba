/**
 * An ended run is compacted off the step's path: the commit that ends it queues it (includes/runIndex.lua) and the
 * reconciler's compactor packs it (src/runs/compactor.ts). A worker SIGKILLed right after that commit therefore leaves
 * no run larger than it should be; two compactors do not pack the same run; a compactor that dies holding a claim
 * leaves the run to the next after the lease; a run that ended again while claimed stays queued for that end.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { killSpawned, spawnReconciler, spawnWorker } from '../../testkit/processes.js';
import { buildSpec } from '../../src/producer/intake.js';
import type { Script } from '../../src/models/scriptedTurns.js';
import { final, read } from '../../testkit/turns.js';
import { until } from '../../testkit/until.js';
import { Compactor } from '../../src/runs/compactor.js';
import { compactClaimCall } from '../../src/store/calls/compactClaim.js';
import { compactDoneCall, compactDoneCalls } from '../../src/store/calls/compactDone.js';
import { newMetrics } from '../../src/metrics/metrics.js';
import { registerScrapeCollectors } from '../../src/runs/scrape.js';

let h: Harness;
beforeEach(async () => {
  h = await createHarness('compactor');
});
afterEach(async () => {
  // The reconciler a test started is stopped with the test: it would outlive the suite and its Redis.
  await killSpawned();
  await h.close();
});

async function createRun(id: string): Promise<string> {
  const script: Script = [read, final];
  const spec = buildSpec(
    h.ctx,
    { tenant: 'acme', ticket: sampleTicket(id), budget: { maxSteps: 10 }, agent: { model: 'scripted', script } },
    Date.now(),
  );
  await h.ctx.store.create(spec, Date.now());
  return spec.runId;
}

const queueOf = (runId: string) => h.ctx.keys.compactQueue(h.ctx.keys.shardOf(runId));
const packed = async (runId: string) => (await h.ctx.redis.exists(h.ctx.keys.run(runId).journalPacked)) === 1;

describe('the compaction of ended runs, by the reconciler', () => {
  it('a worker SIGKILLed right after the commit that ended a run: a reconciler process still compacts it', async () => {
    const runId = await createRun('CMPQ-kill');
    const victim = await spawnWorker({ ...h.env, CRASH_POINTS: 'after_commit@2' });
    expect((await victim.exited).signal).toBe('SIGKILL');
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')).toBe('completed');
    // Ended, not compacted: the journal still a list, the run on its shard's queue.
    expect(await packed(runId)).toBe(false);
    expect(await h.ctx.redis.llen(h.ctx.keys.run(runId).journal)).toBeGreaterThan(0);
    expect(await h.ctx.redis.zscore(queueOf(runId), runId)).not.toBeNull();

    await spawnReconciler(h.env);
    await until('the run compacted', 20_000, async () => (await packed(runId)) && true);
    await until('the run dequeued', 5000, async () => (await h.ctx.redis.zscore(queueOf(runId), runId)) === null);
    expect(await h.ctx.redis.exists(h.ctx.keys.run(runId).journal)).toBe(0);
    expect((await h.ctx.store.transcript(runId)).filter((e) => e.kind === 'decision')).toHaveLength(2);
  });

  it('claims keep two compactors off one run; a lapsed claim is taken again; a run ended again stays queued', async () => {
    const runId = await createRun('CMPQ-claim');
    await h.startWorker();
    expect(await h.waitForStatus(runId, ['completed'])).toBe('completed');
    const queue = queueOf(runId);
    const now = Date.now();

    // A compactor claims the run and dies holding the claim: another passes it by until the lease lapses.
    const [claim] = (await compactClaimCall(h.ctx.redis, queue, now, 1000, 10)).claims;
    expect(claim).toMatchObject({ runId });
    const other = new Compactor(h.ctx);
    expect(await other.pass(now)).toMatchObject({ claimed: 0, packed: 0 });
    expect(await packed(runId)).toBe(false);
    expect(await other.pass(now + 1000)).toMatchObject({ claimed: 1, packed: 1, retained: 0 });
    expect(await packed(runId)).toBe(true);
    expect(await h.ctx.redis.zscore(queue, runId)).toBeNull();

    // A run that ends again while claimed (its end's score written over the claim) is not dequeued by that claim.
    await h.ctx.redis.zadd(queue, now, runId);
    const [again] = (await compactClaimCall(h.ctx.redis, queue, now, 1000, 10)).claims;
    await h.ctx.redis.zadd(queue, now + 5, runId);
    expect(await compactDoneCall(h.ctx.redis, queue, again!)).toBe(false);
    expect(await h.ctx.redis.zscore(queue, runId)).toBe(String(now + 5));

    // A batch is dequeued in one request, each run fenced on its own claim.
    await h.ctx.redis.zadd(queue, now, 'r_batch_a', now, 'r_batch_b');
    const batch = (await compactClaimCall(h.ctx.redis, queue, now + 10, 1000, 10)).claims;
    expect(batch.map((c) => c.runId).sort()).toEqual(['r_batch_a', 'r_batch_b', runId].sort());
    await h.ctx.redis.zadd(queue, now + 20, 'r_batch_b');
    const dequeued = await compactDoneCalls(h.ctx.redis, queue, batch);
    expect(Object.fromEntries(batch.map((c, i) => [c.runId, dequeued[i]]))).toEqual({
      r_batch_a: true,
      r_batch_b: false,
      [runId]: true,
    });
    expect(await h.ctx.redis.zrange(queue, 0, -1)).toEqual(['r_batch_b']);
  });

  it('exports the wait from every process: with no reconciler running, the API shows it grow', async () => {
    const runId = await createRun('CMPQ-unpacked');
    await h.startWorker();
    expect(await h.waitForStatus(runId, ['completed'])).toBe('completed');
    const ended = Number(await h.ctx.redis.zscore(queueOf(runId), runId));
    // The gauge is read from the queue at scrape time, in any process, not set by a compactor's pass.
    const scrapeAt = (now: number) => {
      const m = newMetrics();
      registerScrapeCollectors(m, { ...h.ctx }, { now: () => now });
      return m.registry.getSingleMetricAsString('agent_compaction_lag_seconds');
    };
    expect(await scrapeAt(ended + 700_000)).toMatch(/^agent_compaction_lag_seconds 700$/m);
    // A claim held now lies ahead of the clock: the run is being packed, not waiting.
    await compactClaimCall(h.ctx.redis, queueOf(runId), ended + 700_000, 60_000, 10);
    expect(await scrapeAt(ended + 700_000)).toMatch(/^agent_compaction_lag_seconds 0$/m);
    // A claim that lapsed (its compactor killed) is waiting again, since the lapse.
    expect(await scrapeAt(ended + 820_000)).toMatch(/^agent_compaction_lag_seconds 60$/m);

    // The API's own /metrics (no reconciler in this fleet): the run still waits, and says how long.
    await h.ctx.redis.zadd(queueOf(runId), Date.now() - 5_000, runId);
    const api = await h.startApi();
    const text = await (await fetch(`${api.url}/metrics`)).text();
    const lag = Number(/^agent_compaction_lag_seconds (\S+)$/m.exec(text)?.[1]);
    expect(lag).toBeGreaterThanOrEqual(5);
    expect(lag).toBeLessThan(120);
    expect(text).toMatch(/^agent_archive_lag_seconds 0$/m);
  });

  it('reports how long the oldest ended run has waited for its compaction', async () => {
    const runId = await createRun('CMPQ-lag');
    await h.startWorker();
    expect(await h.waitForStatus(runId, ['completed'])).toBe('completed');
    const ended = Number(await h.ctx.redis.zscore(queueOf(runId), runId));
    const compactor = new Compactor(h.ctx);
    // A run held by another compactor's claim is not waiting: nothing due, no lag.
    await compactClaimCall(h.ctx.redis, queueOf(runId), ended, 60_000, 10);
    expect(await compactor.pass(ended + 30_000)).toMatchObject({ claimed: 0, lagSeconds: 0 });
    // Two runs ended 30 s before the pass (one of them gone since): the pass reports the wait it found, then takes both.
    await h.ctx.redis.zadd(queueOf(runId), ended, runId);
    await h.ctx.redis.zadd(queueOf(runId), ended, 'r_gone_long_ago');
    const report = await compactor.pass(ended + 30_000);
    expect(report).toMatchObject({ claimed: 2, packed: 1, dequeued: 1, lagSeconds: 30 });
    expect(await compactor.pass(ended + 31_000)).toMatchObject({ claimed: 0, lagSeconds: 0 });
    const metrics = await h.ctx.metrics.registry.getSingleMetricAsString('agent_compactions_total');
    expect(metrics).toMatch(/outcome="packed"\} 1/);
    expect(metrics).toMatch(/outcome="not_ended"\} 1/);
  });
});
