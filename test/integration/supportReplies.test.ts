/**
 * The support agent asks and waits, through its signed webhooks: a ticket that says nothing makes the run email
 * the customer a question and park `waiting_event` on the ticket's reply key; the customer's reply, a signed
 * webhook event on the same ticket, resumes that run with the message (202, no run started), once: the same event
 * again is a duplicate and resumes nothing. A reply that finds no run waiting starts a follow-up run, as before.
 * The run reads the customer and the knowledge base in one step.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ObservationEntry } from '../../src/core/journal.js';
import { RUN_STATUSES } from '../../src/core/status.js';
import { postSigned } from '../support/webhooks.js';
import { replyKey } from '../../src/agents/support/tools/waitForReply.js';
import { createHarness, type Harness } from '../../testkit/harness.js';
import { readRunEvents } from '../../testkit/runEvents.js';

const SECRET = 'acme-webhook-secret';
let h: Harness;
let url: string;
beforeAll(async () => {
  h = await createHarness('support-replies', { WEBHOOK_SECRETS: JSON.stringify({ acme: SECRET }) });
  await h.startWorker();
  url = (await h.startApi()).url;
});
afterAll(async () => {
  await h.close();
});

const post = (path: string, body: unknown) => postSigned(`${url}${path}`, SECRET, body);

const ticket = (id: string, body: string) => ({
  id,
  subject: 'My order',
  body,
  customer: { email: 'ada@example.com', name: 'Ada' },
});
const ticketEvent = (eventId: string, id: string, body: string) => ({ v: 1, eventId, ticket: ticket(id, body) });

async function observations(runId: string): Promise<ObservationEntry[]> {
  return (await h.ctx.store.transcript(runId)).filter((e): e is ObservationEntry => e.kind === 'observation');
}

async function wokeEvents(runId: string): Promise<number> {
  return (await readRunEvents(h.ctx, runId)).filter((e) => e.type === 'woke').length;
}

describe('the support agent waits for the customer on its ticket', () => {
  it("a reply webhook resumes the run waiting on the ticket's reply key, once; a redelivery resumes nothing", async () => {
    const first = await post('/webhooks/tickets?tenant=acme', ticketEvent('ev-q1', 'RQ-1', ''));
    expect(first.status).toBe(201);
    const runId = first.body.runId as string;
    expect(await h.waitForStatus(runId, ['waiting_event', 'completed', 'failed', 'needs_human'])).toBe('waiting_event');
    // The question went out in the turn that parked the run.
    expect(h.sandbox.counts().byResource.emails.records).toBe(1);

    const reply = await post('/webhooks/tickets?tenant=acme', ticketEvent('ev-q2', 'RQ-1', 'Order 77, it broke.'));
    expect(reply).toEqual({ status: 202, body: { runId, created: false, duplicate: false, resumed: true } });
    const again = await post('/webhooks/tickets?tenant=acme', ticketEvent('ev-q2', 'RQ-1', 'Order 77, it broke.'));
    // The run the event resumed, found as a redelivery finds a run, with the status it has reached by now.
    expect(again).toEqual({
      status: 200,
      body: { runId, created: false, status: again.body.status, duplicate: true },
    });
    expect(RUN_STATUSES).toContain(again.body.status);
    // A retry whose event record is gone (deleted after an error that hid the delivery) finds the same delivery.
    await h.ctx.redis.del(h.ctx.keys.webhookEvent('acme', 'support', 'tickets', 'ev-q2'));
    const retried = await post('/webhooks/tickets?tenant=acme', ticketEvent('ev-q2', 'RQ-1', 'Order 77, it broke.'));
    expect(retried).toEqual({ status: 202, body: { runId, created: false, duplicate: false, resumed: true } });

    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('completed');
    const waited = (await observations(runId)).filter((o) => o.tool === 'wait_for_reply');
    expect(waited.map((o) => o.output)).toEqual([{ event: { message: 'Order 77, it broke.' } }]);
    expect(await wokeEvents(runId)).toBe(1);
    // No follow-up run: the reply was this run's.
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'nextRunId')).toBeNull();
    expect(await h.ctx.redis.hget(h.ctx.keys.eventKey('acme', 'support', replyKey('RQ-1')), 'state')).toBe('consumed');
    const counts = h.sandbox.counts();
    expect(counts.byResource.emails.records).toBe(2); // the question and the acknowledgement
    expect(counts.byResource.tickets.records).toBe(1);
    expect(counts.duplicates).toBe(0);
  });

  it('a Zendesk comment on the ticket resumes its waiting run with the comment', async () => {
    const zendesk = (comment?: { id: number; body: string }) => ({
      ticket: {
        id: 9001,
        subject: 'My order',
        description: '',
        requester: { email: 'bo@example.com', name: 'Bo' },
      },
      ...(comment ? { comment } : {}),
    });
    const first = await post('/webhooks/zendesk/acme', zendesk());
    expect(first.status).toBe(201);
    const runId = first.body.runId as string;
    expect(await h.waitForStatus(runId, ['waiting_event', 'completed', 'failed'])).toBe('waiting_event');
    const reply = await post('/webhooks/zendesk/acme', zendesk({ id: 55, body: 'Size M, please.' }));
    expect(reply).toMatchObject({ status: 202, body: { runId, resumed: true } });
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('completed');
    const waited = (await observations(runId)).filter((o) => o.tool === 'wait_for_reply');
    expect(waited.map((o) => o.output)).toEqual([{ event: { message: 'Size M, please.' } }]);
  });

  it('a reply that finds no run waiting starts a follow-up run; the run read customer and knowledge base in one step', async () => {
    const first = await post('/webhooks/tickets?tenant=acme', ticketEvent('ev-f1', 'RF-1', 'The mug broke.'));
    const runId = first.body.runId as string;
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('completed');
    const reads = (await observations(runId)).filter((o) => o.step === 2);
    expect(reads.map((o) => [o.tool, o.status])).toEqual([
      ['lookup_customer', 'ok'],
      ['search_kb', 'ok'],
    ]);

    const reply = await post('/webhooks/tickets?tenant=acme', ticketEvent('ev-f2', 'RF-1', 'Any news?'));
    expect(reply).toMatchObject({ status: 201, body: { created: true, previousRunId: runId } });
    expect(await h.waitForStatus(reply.body.runId as string, ['completed', 'failed', 'needs_human'])).toBe('completed');
  });

  it('a hook naming a wait key the store cannot hold is a 400 naming it, nothing written', async () => {
    const long = 'x'.repeat(200);
    const res = await post('/webhooks/tickets?tenant=acme', ticketEvent('ev-k1', long, 'hello'));
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: 'invalid_request', fields: [{ path: '(delivery key)' }] });
    expect(await h.ctx.redis.exists(h.ctx.keys.webhookEvent('acme', 'support', 'tickets', 'ev-k1'))).toBe(0);
  });
});
