/**
 * Flow control and runs parked for a person, under a tenant limit of one run at work: a run that parks
 * `needs_human` (a model outage past MODEL_OUTAGE_MAX_MS, the human queue) or `waiting_approval` gives its
 * slot back, and the tenant's next run in line is admitted and completes while the parked run still waits.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, sampleTicket } from '../../testkit/harness.js';
import { startRun } from '../../src/producer/intake.js';
import { stepJobId } from '../../src/store/keys.js';
import type { Script } from '../../src/models/scriptedTurns.js';
import { final, operatorHarness, refund, turn } from './operators/support.js';

let h: Harness & { url: string };
beforeAll(async () => {
  h = await operatorHarness('flowhuman', {
    FLOW_CONTROL: 'true',
    FLOW_TENANT_CONCURRENCY: '1',
    MODEL_OUTAGE_MAX_MS: '0',
    MODEL_MAX_ATTEMPTS: '2',
    // No bookkeeping sweep: the slot must come back with the park itself.
    FLOW_SWEEP_MS: '600000',
  });
});
afterAll(async () => {
  await h.close();
});

let n = 0;
async function start(tenant: string, script: Script): Promise<string> {
  const ticket = { ...sampleTicket(`FH-${++n}-${Date.now()}`), subject: `order ${n}` };
  return (await startRun(h.ctx, { tenant, ticket, agent: { model: 'scripted', script } }, `fh-${n}-${Date.now()}`))
    .runId;
}
const heldOf = async (tenant: string) => Number((await h.ctx.redis.hget(h.ctx.keys.flow().counts, `t:${tenant}`)) ?? 0);
const jobState = (runId: string) => h.ctx.queues.forRun(runId).getJobState(stepJobId(runId, 1));

describe('a run parked for a person holds no slot', () => {
  it('needs_human (the human queue): the slot goes to the next run in line, which completes', async () => {
    const parked = await start('human', [turn([], { transientFailures: 20 }), final]);
    const next = await start('human', [final]);
    expect(await jobState(next)).toBe('delayed');
    expect(await h.waitForStatus(parked, ['needs_human', 'completed', 'failed'], 20_000)).toBe('needs_human');
    expect(await h.waitForStatus(next, ['completed', 'failed'], 20_000)).toBe('completed');
    expect(await h.ctx.redis.hget(h.ctx.keys.run(parked).run, 'status')).toBe('needs_human');
    expect(await h.ctx.redis.hexists(h.ctx.keys.flow().held, parked)).toBe(0);
    expect(await heldOf('human')).toBe(0);
  }, 30_000);

  it('waiting_approval: the slot goes to the next run in line, which completes', async () => {
    const parked = await start('approval', [turn([refund(10_000)]), final]);
    const next = await start('approval', [final]);
    expect(await jobState(next)).toBe('delayed');
    expect(await h.waitForStatus(parked, ['waiting_approval', 'completed', 'failed'], 20_000)).toBe('waiting_approval');
    expect(await h.waitForStatus(next, ['completed', 'failed'], 20_000)).toBe('completed');
    expect(await h.ctx.redis.hget(h.ctx.keys.run(parked).run, 'status')).toBe('waiting_approval');
    expect(await heldOf('approval')).toBe(0);
  }, 30_000);
});
