/** Cancelling runs: parked ones at once, running ones at the next commit, with no dispatch after the request. */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Ledger } from '../../../src/ledger/ledger.js';
import type { Harness } from '../../../testkit/harness.js';
import { call, email, final, operatorHarness, refund, startScripted, turn } from './support.js';
import { until } from '../../../testkit/until.js';

const ticketCall = {
  name: 'create_ticket',
  args: { subject: 'Follow-up', body: 'Broken mug', priority: 'normal', sourceTicketId: 'T' },
};

let h: Harness & { url: string };
let ledger: Ledger;
beforeAll(async () => {
  h = await operatorHarness('cancel');
  ledger = new Ledger(h.ctx.redis, h.ctx.keys);
});
afterAll(async () => {
  await h.close();
});
beforeEach(() => h.sandbox.reset());

describe('cancel', () => {
  it('a parked run is cancelled directly', async () => {
    const runId = await startScripted(h, [turn([refund(10_000)]), final], 'CAN');
    await h.waitForStatus(runId, ['waiting_approval']);
    const res = await call(h.url, 'POST', `/v1/runs/${runId}/cancel`, { operator: 'olga' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'cancelled', cancelled: 'now' });
    expect(await h.ctx.store.readState(runId)).toMatchObject({
      status: 'cancelled',
      reason: 'cancelled_by_operator: requested by operator',
      cancelRequested: true,
    });
    const again = await call(h.url, 'POST', `/v1/runs/${runId}/cancel`, {});
    expect(again.status).toBe(409);
    expect(h.sandbox.counts().byResource.refunds.records).toBe(0);
  });

  it('a running run dispatches nothing after the request and is cancelled at its next commit', async () => {
    h.sandbox.setFaults([{ kind: 'slow_commit', resource: 'tickets', ms: 600 }]);
    // The email in the next step: the calls of one turn run at once, so it would leave beside the ticket.
    const runId = await startScripted(h, [turn([ticketCall]), turn([email]), final], 'CAN');
    // Wait until the ticket is in flight, then cancel.
    await until(
      'the ticket in flight',
      10_000,
      async () => (await ledger.listForRun(runId)).some((e) => e.state === 'dispatched'),
      10,
    );
    const res = await call(h.url, 'POST', `/v1/runs/${runId}/cancel`, {});
    expect(res.status).toBe(202);
    expect(res.body.cancelled).toBe('at_next_commit');
    expect(await h.waitForStatus(runId, ['cancelled', 'completed', 'failed'])).toBe('cancelled');
    expect(h.sandbox.counts().byResource.tickets.records).toBe(1);
    expect(h.sandbox.counts().byResource.emails.records).toBe(0);
    const obs = (await h.ctx.store.transcript(runId))
      .filter((e) => e.kind === 'observation')
      .map((e) => e.kind === 'observation' && [e.tool, e.status]);
    expect(obs).toEqual([['create_ticket', 'ok']]);
    expect((await h.ctx.store.readState(runId))?.reason).toBe('cancelled_by_operator: requested by operator');
  });

  it('an unknown run is 404 and the route needs the operator token', async () => {
    expect((await call(h.url, 'POST', '/v1/runs/r_nope/cancel', {})).status).toBe(404);
    expect((await call(h.url, 'POST', '/v1/runs/r_nope/cancel', {}, '')).status).toBe(401);
  });
});
