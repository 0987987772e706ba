/**
 * Flow control heals after lost writes (src/flow/repair.ts), on real Redis: each test plants what a failover that lost
 * acknowledged writes leaves (flow state on one master, the runs and their jobs on another: docs/flow-control.md), shows
 * the bookkeeping sweep does not undo it, and the repair pass admits the run, counted and logged.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { startRun } from '../../src/producer/intake.js';
import { flowAdmit } from '../../src/store/calls/flowAdmit.js';
import { FlowRepair } from '../../src/flow/repair.js';
import { delayedUntil } from '../../src/store/bullmqInternals.js';
import { stepJobId } from '../../src/store/keys.js';
import { admitArgs } from '../support/admitArgs.js';

let h: Harness;
let repair: FlowRepair;
let n = 0;
const start = (tenant: string) =>
  startRun(h.ctx, { tenant, ticket: { ...sampleTicket(`R-${++n}`), subject: `order ${n}` } }, `rk-${n}`);
const flow = () => h.ctx.keys.flow();
const jobState = async (runId: string) => {
  const state = await h.ctx.queues.forRun(runId).getJobState(stepJobId(runId, 1));
  return state === 'prioritized' || state === 'waiting' ? 'queued' : state;
};
const repairs = async (repair: string) =>
  (await h.ctx.metrics.registry.getSingleMetric('agent_flow_repairs_total')?.get())?.values.find(
    (v) => v.labels.repair === repair,
  )?.value ?? 0;
/** A pass that sees every planted state as old enough to repair. */
const later = () => Date.now() + 60_000;

/** Two runs of a tenant limited to one at work: the first admitted, the second waiting in line. */
async function twoRuns(tenant: string): Promise<[string, string]> {
  await h.ctx.redis.hset(flow().settings, `t:${tenant}`, '1');
  const first = (await start(tenant)).runId;
  const second = (await start(tenant)).runId;
  expect(await jobState(first)).toBe('queued');
  expect(await jobState(second)).toBe('delayed');
  return [first, second];
}

beforeAll(async () => {
  h = await createHarness('flowRepair', { FLOW_CONTROL: 'true', FLOW_SWEEP_MS: '100000', FLOW_REPAIR_MS: '1000' });
  const { redis, keys, queues, cfg, metrics, log } = h.ctx;
  repair = new FlowRepair({ redis, keys, queues, cfg, metrics, log, admission: h.ctx.admission! });
});
afterAll(async () => {
  await h.close();
});

describe('flow control after lost writes', () => {
  it('an admitted run whose promotion was lost (its slot held, its job still delayed) is released', async () => {
    const [, second] = await twoRuns('lostpromote');
    // The admission's slot survives on the flow master; its promotion on the run's master is lost.
    await h.ctx.redis.hset(flow().settings, 't:lostpromote', '2');
    const [admitted] = await flowAdmit(h.ctx.redis, flow(), admitArgs());
    expect(admitted?.runId).toBe(second);
    await h.ctx.redis.hdel(flow().pending, second);
    await h.ctx.admission!.sweep();
    expect(await jobState(second)).toBe('delayed');
    const before = await repairs('job_released');
    const report = await repair.pass(later());
    expect(report.job_released).toBe(1);
    expect(await jobState(second)).toBe('queued');
    expect(await repairs('job_released')).toBe(before + 1);
  });

  it('a queued run whose line entry was lost is put back in line and admitted', async () => {
    const [first, second] = await twoRuns('lostline');
    await h.ctx.redis
      .multi()
      .hdel(flow().waiting, second)
      .zrem(h.ctx.keys.flowLine('lostline'), second)
      .zrem(flow().turns, 'lostline')
      .exec();
    // The first run ends: its slot back, the sweep admits what waits, and nothing waits.
    await h.ctx.admission!.release(first);
    await h.ctx.admission!.sweep();
    expect(await jobState(second)).toBe('delayed');
    const report = await repair.pass(later());
    expect(report.requeued).toBe(1);
    expect(await jobState(second)).toBe('queued');
    expect(await h.ctx.redis.hexists(flow().held, second)).toBe(1);
  });

  it('a slot counter left at the limit with nobody holding a slot is recomputed, and the waiting run admitted', async () => {
    const [first, second] = await twoRuns('lostcount');
    // The counter says the tenant is at its limit; the slot it counts is held by nobody.
    await h.ctx.redis.hdel(flow().held, first);
    await h.ctx.admission!.sweep();
    expect(await jobState(second)).toBe('delayed');
    const report = await repair.pass(later());
    expect(report.count_recomputed).toBeGreaterThanOrEqual(1);
    expect(await jobState(second)).toBe('queued');
    expect(await h.ctx.redis.hget(flow().counts, 't:lostcount')).toBe('1');
  });

  it('a line entry whose run has ended is taken out of its line', async () => {
    const [, second] = await twoRuns('lostend');
    // The run was cancelled while it waited; its withdrawal from the line was lost.
    await h.ctx.redis.hset(h.ctx.keys.run(second).run, 'status', 'cancelled');
    const report = await repair.pass(later());
    expect(report.line_entry_removed).toBe(1);
    expect(await h.ctx.redis.hexists(flow().waiting, second)).toBe(0);
    expect(await h.ctx.redis.zscore(h.ctx.keys.flowLine('lostend'), second)).toBeNull();
  });

  it('reads a delayed job’s due time as BullMQ wrote it', async () => {
    const queue = h.ctx.queues.byShard(0);
    const due = Date.now() + 3_600_000;
    const job = await queue.add('probe', {}, { delay: due - Date.now(), jobId: 'delay-probe' });
    const [read] = await delayedUntil(h.ctx.redis, `${h.ctx.keys.queueKeyPrefix(0)}delayed`, [job.id!]);
    expect(Math.abs(read! - due)).toBeLessThan(1000);
    await job.remove();
  });
});
