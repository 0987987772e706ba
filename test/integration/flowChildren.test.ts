/**
 * Flow control and child runs: with one slot for the tenant, a parent that hands work to a child must give its
 * slot back when it parks `waiting_child` (else the child, admitted like any run, would wait for ever behind its
 * own parent), and take one again when it wakes. Both complete; no slot is left held.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from '../../testkit/harness.js';
import { createContext } from '../../src/server/buildContext.js';
import { startRun } from '../../src/producer/intake.js';
import type { EngineContext } from '../../src/runs/engineContext.js';
import { childRunsOf } from '../../src/runs/children.js';
import { refunds, triageAgent } from '../../examples/triage-refunds/index.js';
import { readRunEvents } from '../../testkit/runEvents.js';
import { until } from '../../testkit/until.js';

let h: Harness;
let ctx: EngineContext;
beforeAll(async () => {
  h = await createHarness('flowchildren', { FLOW_CONTROL: 'true', FLOW_TENANT_CONCURRENCY: '1' });
  const triage = triageAgent({ baseUrl: h.env.SANDBOX_URL!, token: 'sandbox-token' });
  ctx = await createContext(h.cfg, 'flowchildren', { agents: [triage, refunds] });
  await h.startWorker({}, ctx);
});
afterAll(async () => {
  await h.close();
});

const ENDED = ['completed', 'failed', 'budget_exceeded', 'cancelled', 'needs_human'];
const held = async () => Number((await ctx.redis.hget(ctx.keys.flow().counts, 't:acme')) ?? 0);

describe('flow control with child runs', () => {
  it('one slot: the parked parent gives it to its child and takes it back when it wakes', async () => {
    const input = { ticketId: 'FC-1', text: 'refund please', orderId: 'O-FC-1', amountCents: 1200 };
    const { runId } = await startRun(ctx, { tenant: 'acme', agent: 'triage', input, model: 'scripted' }, undefined);
    expect(await h.waitForStatus(runId, ENDED)).toBe('completed');
    const [child] = await childRunsOf(ctx).childrenOf(runId);
    expect(await h.waitForStatus(child!, ENDED)).toBe('completed');
    const events = await readRunEvents(ctx, runId);
    expect(events.some((e) => e.type === 'woke')).toBe(true);
    // The slot goes back right after the parent's last commit.
    await until('the slot given back', 5000, async () => (await held()) === 0);
  });
});
