/**
 * A step that meets Redis at maxmemory (noeviction refuses every write with OOM), with a real FleetWorker on a Redis
 * of its own: the run's step is in flight (its customer lookup held by the sandbox) when the store fills, so the
 * step's writes are refused. The step is counted (agent_store_refusals_total{reason="full",where="worker"}) and logged
 * `store_full`; while the store stays full the run is not failed, the job spends no attempt (its attemptsMade in Redis
 * stays as it was) and no stall, nothing more reaches a vendor, and the worker's refused fetches are paced, not spun;
 * once maxmemory is raised the run completes, each step journalled once and its ticket and email sent once.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/metrics/log.js';
import { newMetrics } from '../../src/metrics/metrics.js';
import { buildSpec } from '../../src/producer/intake.js';
import type { EngineContext } from '../../src/runs/engineContext.js';
import { createContext } from '../../src/server/buildContext.js';
import { startEmbeddedRedis, type EmbeddedRedis } from '../../testkit/embeddedRedis.js';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { until } from '../../testkit/until.js';
import { captureLines } from '../support/logCapture.js';

let redis: EmbeddedRedis;
let h: Harness;
let admin: Redis;
let ctx: EngineContext;
const out = captureLines();
beforeAll(async () => {
  redis = await startEmbeddedRedis();
  admin = new Redis(redis.url);
  h = await createHarness('storefullworker', { REDIS_URL: redis.url, STORE_RETRY_AFTER_S: '1' });
  ctx = await createContext(h.cfg, 'storefullworker', {
    log: createLogger('storefullworker', 'info', out.stream),
    metrics: newMetrics(),
  });
  await h.startWorker({}, ctx);
}, 60_000);
afterAll(async () => {
  await admin?.config('SET', 'maxmemory', '0');
  await h?.close();
  admin?.disconnect();
  await redis?.stop();
});

/** maxmemory below what is in use: every write is refused (OOM), reads are served. */
const fill = () => admin.config('SET', 'maxmemory', '1');
const makeRoom = () => admin.config('SET', 'maxmemory', '0');

const refusedFull = async () =>
  (await ctx.metrics.storeRefusals.get()).values.find((v) => v.labels.reason === 'full' && v.labels.where === 'worker')
    ?.value ?? 0;

/** The run's current step job as Redis holds it (not as the worker's copy has it). */
async function currentJob(runId: string) {
  const state = await ctx.store.readState(runId);
  const job = await ctx.queues.forRun(runId).getJob(state!.jobId);
  return { state: state!, job: job! };
}

describe('a worker step meeting a full Redis', () => {
  it('is delayed without failing the run or spending an attempt, and the run completes once there is room', async () => {
    const spec = buildSpec(ctx, { tenant: 'acme', ticket: sampleTicket('FULL-W1') }, Date.now());
    const { runId } = spec;
    // Step 2 looks the customer up: the sandbox holds that read, so the step is in flight when the store fills.
    h.sandbox.setFaults([{ kind: 'slow_commit', resource: 'customers', ms: 1500, count: 1 }]);
    await ctx.store.create(spec, Date.now());
    await until('the customer lookup held', 20_000, () => h.sandbox.held() > 0);
    const before = await currentJob(runId);
    expect(before.state.cursor).toBe(2);
    const attemptsMade = before.job.attemptsMade;
    await fill();
    try {
      await until('a step refused for memory', 10_000, async () => (await refusedFull()) > 0);
      const full = out.lines().filter((l) => l.code === 'store_full');
      expect(full[0]).toMatchObject({ runId, step: 2, msg: 'store full (Redis maxmemory): step delayed' });
      const requests = h.sandbox.counts().requests;
      const logged = out.lines().length;
      // Longer than the job's lock (2 s) and several stalled checks and delays (1 s).
      await new Promise((r) => setTimeout(r, 4000));
      const during = await currentJob(runId);
      expect(during.state).toMatchObject({ status: 'running', cursor: 2 });
      expect(await during.job.getState()).not.toBe('failed');
      // No attempt spent, no stall counted: the step is delayed, again while the store stays full.
      expect(during.job.attemptsMade).toBe(attemptsMade);
      expect(during.job.stalledCounter).toBe(0);
      expect(await refusedFull()).toBeGreaterThan(1);
      // The delayed step meets the full store before anything of it reaches a vendor (or the model) again.
      expect(h.sandbox.counts().requests).toBe(requests);
      // The worker's fetch loop, refused too, is paced (STORE_RETRY_AFTER_S), not spun: BullMQ asks again at once
      // after any error that is not a lost connection, thousands of refused fetches and log lines a second.
      const refusedFetches = out
        .lines()
        .slice(logged)
        .filter((l) => l.code === 'worker_error');
      expect(refusedFetches.length).toBeLessThan(40);
      expect(out.lines().filter((l) => l.msg === 'step failed')).toEqual([]);
    } finally {
      await makeRoom();
    }
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human', 'budget_exceeded'])).toBe('completed');
    await h.untilNoJob(runId);

    // Each step decided and journalled once; the ticket and the email sent once.
    const decisions = (await ctx.store.transcript(runId)).filter((e) => e.kind === 'decision').map((e) => e.step);
    expect(decisions).toEqual([1, 2, 3, 4, 5]);
    const counts = h.sandbox.counts();
    expect(counts.byResource.tickets.records).toBe(1);
    expect(counts.byResource.emails.records).toBe(1);
    expect(counts.duplicates).toBe(0);
    expect(out.lines().filter((l) => l.msg === 'step failed')).toEqual([]);
  });
});
