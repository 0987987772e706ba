/**
 * A shard whose BullMQ fetch loop stopped (as after some failovers, docs/failover.md) is noticed and given a new
 * worker: the run waiting in its queue completes. The loop is stopped the way a hung fetch stops it: the worker's
 * next-job fetch never settles. Without the fetch watch the run would wait in `wait` for ever.
 * Under flow control (its default) a step job is not in `wait` but in BullMQ's `prioritized` set: the state the
 * Cluster failover campaign left two runs in (a slot held, the step 1 job prioritized, no worker taking it), which
 * the watch, counting only `wait` and due `delayed` jobs, took for an idle shard.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { FleetWorker } from '../../src/worker/fleetWorker.js';
import { createEffectRunner } from '../../src/ledger/runner.js';
import { buildSpec, startRun } from '../../src/producer/intake.js';
import { stepJobId } from '../../src/store/keys.js';
import type { Script } from '../../src/models/scriptedTurns.js';
import { final, read } from '../../testkit/turns.js';

let h: Harness | undefined;
let fleet: FleetWorker | undefined;
afterEach(async () => {
  await fleet?.stop(true);
  await h?.close();
  fleet = undefined;
  h = undefined;
});

describe('fetch watch', () => {
  it("replaces a shard's worker whose fetch loop stopped while a job was ready; the run completes", async () => {
    h = await createHarness('fetchwatch', { FETCH_STALL_MS: '1000' });
    fleet = new FleetWorker(h.ctx, { effects: createEffectRunner(h.ctx) });
    // The loop hangs in its first fetch, for good.
    (fleet.workers[0] as unknown as { _getNextJob: () => Promise<never> })._getNextJob = () => new Promise(() => {});
    await fleet.start();
    const spec = buildSpec(
      h.ctx,
      {
        tenant: 'acme',
        ticket: sampleTicket('FW-1'),
        budget: { maxSteps: 10 },
        agent: { model: 'scripted', script: [read, final] as Script },
      },
      Date.now(),
    );
    await h.ctx.store.create(spec, Date.now());

    expect(await h.waitForStatus(spec.runId, ['completed', 'failed', 'needs_human'], 20_000)).toBe('completed');
    expect((await h.ctx.metrics.fetchLoopRestarts.get()).values[0]?.value).toBe(1);
    expect(fleet.workers[0]!.id).not.toContain('undefined');
  }, 30_000);

  it('sees a prioritized step job (flow control) as ready: the stopped loop is replaced, the admitted run completes', async () => {
    // A step job is prioritized when its tenant holds two runs or more a unit of weight (src/flow/stepPriority.ts):
    // acme, weighted 0.5, holds two with one run.
    h = await createHarness('fetchwatchflow', {
      FETCH_STALL_MS: '1000',
      FLOW_CONTROL: 'true',
      FLOW_TENANT_WEIGHTS: '{"acme":0.5}',
    });
    const { runId } = await startRun(
      h.ctx,
      {
        tenant: 'acme',
        ticket: sampleTicket('FW-2'),
        budget: { maxSteps: 10 },
        agent: { model: 'scripted', script: [read, final] as Script },
      },
      'fw-2',
    );
    // What the campaign's stuck runs showed: admitted (a slot held, nothing pending) and the step 1 job prioritized.
    const flow = h.ctx.keys.flow();
    expect(await h.ctx.redis.hexists(flow.held, runId)).toBe(1);
    expect(await h.ctx.redis.hexists(flow.pending, runId)).toBe(0);
    expect(await h.ctx.queues.forRun(runId).getJobState(stepJobId(runId, 1))).toBe('prioritized');
    fleet = new FleetWorker(h.ctx, { effects: createEffectRunner(h.ctx) });
    (fleet.workers[0] as unknown as { _getNextJob: () => Promise<never> })._getNextJob = () => new Promise(() => {});
    await fleet.start();

    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'], 20_000)).toBe('completed');
    expect((await h.ctx.metrics.fetchLoopRestarts.get()).values[0]?.value).toBe(1);
  }, 30_000);
});
