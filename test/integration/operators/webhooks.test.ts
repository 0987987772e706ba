/** Signed ticket webhooks: signature over the raw body, tolerance window, event dedupe, run start. */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../../src/core/agent.js';
import { createFullApi } from '../../../src/http/fullApi.js';
import { newMetrics } from '../../../src/metrics/metrics.js';
import { createContext } from '../../../src/server/buildContext.js';
import { type Harness, sampleTicket } from '../../../testkit/harness.js';
import { sign } from '../../../src/producer/webhookSignature.js';
import { eventTtlMs } from '../../../src/producer/webhooks.js';
import { operatorHarness } from './support.js';

const SECRET = 'acme-webhook-secret';
let h: Harness & { url: string };
beforeAll(async () => {
  h = await operatorHarness('webhooks', {
    WEBHOOK_SECRETS: JSON.stringify({ acme: SECRET }),
    WEBHOOK_TOLERANCE_S: '60',
  });
});
afterAll(async () => {
  await h.close();
});

type PostOptions = {
  secret?: string;
  timestamp?: string;
  signature?: string;
  headers?: Record<string, string>;
  url?: string;
};

async function post(path: string, raw: string, opts: PostOptions = {}) {
  const timestamp = opts.timestamp ?? new Date().toISOString();
  const signature = opts.signature ?? sign(opts.secret ?? SECRET, timestamp, raw);
  const res = await fetch(`${opts.url ?? h.url}${path}`, {
    method: 'POST',
    body: raw,
    headers: {
      'content-type': 'application/json',
      'x-zendesk-webhook-signature': signature,
      'x-zendesk-webhook-signature-timestamp': timestamp,
      ...opts.headers,
    },
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('signed webhooks', () => {
  it('a valid ticket event starts a run once; a redelivered event is a duplicate', async () => {
    const raw = JSON.stringify({ v: 1, eventId: 'ev-1', ticket: sampleTicket('W-1') });
    const first = await post('/webhooks/tickets?tenant=acme', raw);
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ created: true, duplicate: false });
    expect(await h.ctx.store.exists(first.body.runId as string)).toBe(true);
    const again = await post('/webhooks/tickets/acme', raw);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ runId: first.body.runId, duplicate: true });
  });

  it('a zendesk event maps the ticket and starts its run', async () => {
    const raw = JSON.stringify({
      ticket: {
        id: 4242,
        subject: 'Broken mug',
        description: 'It arrived shattered',
        requester: { email: 'ada@example.com', name: 'Ada' },
      },
    });
    const res = await post('/webhooks/zendesk/acme', raw);
    expect(res.status).toBe(201);
    const spec = await h.ctx.store.readSpec(res.body.runId as string);
    expect(spec?.input).toMatchObject({
      id: 'zendesk-4242',
      body: 'It arrived shattered',
      customer: { email: 'ada@example.com' },
    });
  });

  it('one signed payload is one event whatever its unsigned headers say, and a re-signed redelivery too', async () => {
    const raw = JSON.stringify({
      ticket: {
        id: 5151,
        subject: 'Late parcel',
        description: 'Where is it?',
        requester: { email: 'ada@example.com', name: 'Ada' },
      },
    });
    const timestamp = new Date().toISOString();
    const signature = sign(SECRET, timestamp, raw);
    const first = await post('/webhooks/zendesk/acme', raw, {
      timestamp,
      signature,
      headers: { 'x-zendesk-webhook-invocation-id': 'inv-1' },
    });
    expect(first.status).toBe(201);
    const replays: Record<string, string>[] = [
      { 'x-zendesk-webhook-invocation-id': 'inv-2' },
      { 'x-zendesk-webhook-invocation-id': 'inv-3' },
      {},
      { 'x-request-id': 'r-9' },
    ];
    for (const headers of replays) {
      const replay = await post('/webhooks/zendesk/acme', raw, { timestamp, signature, headers });
      expect(replay, JSON.stringify(headers)).toMatchObject({
        status: 200,
        body: { runId: first.body.runId, duplicate: true },
      });
    }
    const resigned = await post('/webhooks/zendesk/acme', raw, {
      timestamp: String(Math.floor(Date.now() / 1000) - 1),
    });
    expect(resigned).toMatchObject({ status: 200, body: { runId: first.body.runId, duplicate: true } });
  });

  it('an event id is remembered at least as long as its signature can be replayed', () => {
    expect(eventTtlMs(60)).toBe(24 * 3600_000);
    expect(eventTtlMs(3 * 24 * 3600)).toBeGreaterThanOrEqual(2 * 3 * 24 * 3600_000);
  });

  it('refuses a bad signature, a tampered body, a stale timestamp, an unknown tenant, and a bad body', async () => {
    const raw = JSON.stringify({ v: 1, eventId: 'ev-2', ticket: sampleTicket('W-2') });
    expect((await post('/webhooks/tickets?tenant=acme', raw, { secret: 'another-secret' })).status).toBe(401);
    const ts = new Date().toISOString();
    const sig = sign(SECRET, ts, raw);
    expect(
      (await post('/webhooks/tickets?tenant=acme', raw.replace('W-2', 'W-3'), { timestamp: ts, signature: sig }))
        .status,
    ).toBe(401);
    const old = new Date(Date.now() - 120_000).toISOString();
    const stale = await post('/webhooks/tickets?tenant=acme', raw, { timestamp: old });
    expect(stale).toMatchObject({ status: 401, body: { reason: 'stale' } });
    expect((await post('/webhooks/tickets?tenant=other', raw)).status).toBe(401);
    expect((await post('/webhooks/tickets?tenant=acme', JSON.stringify({ v: 1, eventId: 'ev-3' }))).status).toBe(400);
    expect((await post('/webhooks/tickets?tenant=acme', '{not json')).status).toBe(400);
    expect(await h.ctx.redis.exists(h.ctx.keys.run(`r_never`).run)).toBe(0);
  });

  it('unix-seconds timestamps are accepted too', async () => {
    const raw = JSON.stringify({ v: 1, eventId: 'ev-4', ticket: sampleTicket('W-4') });
    const res = await post('/webhooks/tickets?tenant=acme', raw, { timestamp: String(Math.floor(Date.now() / 1000)) });
    expect(res.status).toBe(201);
  });

  it('a tenant naming an inherited property is a 401, never a 500', async () => {
    const raw = JSON.stringify({ v: 1, eventId: 'ev-5', ticket: sampleTicket('W-5') });
    for (const tenant of ['constructor', 'toString', 'hasOwnProperty', 'valueOf', '__proto__']) {
      for (const path of [`/webhooks/tickets?tenant=${tenant}`, `/webhooks/zendesk/${tenant}`]) {
        const res = await post(path, raw);
        expect(res.status, path).toBe(401);
        expect(res.body).toEqual({ error: 'invalid_signature', reason: 'bad_signature' });
      }
    }
  });

  it('a tenant without a secret is answered as a configured one with a wrong signature: which exist is not told', async () => {
    const raw = JSON.stringify({ v: 1, eventId: 'ev-6', ticket: sampleTicket('W-6') });
    const stale = new Date(Date.now() - 3_600_000).toISOString();
    for (const opts of [{ secret: 'not-the-secret' }, { timestamp: stale }, { signature: '', timestamp: '' }]) {
      for (const hook of ['tickets?tenant=', 'zendesk/']) {
        const configured = await post(`/webhooks/${hook}acme`, raw, opts);
        const unknown = await post(`/webhooks/${hook}nobody`, raw, opts);
        expect(configured.status).toBe(401);
        expect(unknown, JSON.stringify(opts)).toEqual(configured);
      }
    }
  });

  it('bad bodies: unknown nested fields and deep nesting are 400, an oversized body a 413 naming the limit', async () => {
    const zendesk = {
      ticket: {
        id: 77,
        subject: 'S',
        description: 'D',
        requester: { email: 'ada@example.com', name: 'Ada', phone: '555' },
      },
    };
    const unknownField = await post('/webhooks/zendesk/acme', JSON.stringify(zendesk));
    expect(unknownField.status).toBe(400);
    expect(JSON.stringify(unknownField.body)).toContain('ticket.requester');
    const ticket = { ...sampleTicket('W-6'), customer: { ...sampleTicket().customer, vip: true } };
    expect((await post('/webhooks/tickets/acme', JSON.stringify({ v: 1, eventId: 'ev-6', ticket }))).status).toBe(400);
    let deep = '"x"';
    for (let i = 0; i < 50_000; i++) deep = `[${deep}]`;
    const tooDeep = await post('/webhooks/tickets/acme', `{"v":1,"eventId":"ev-7","ticket":${deep}}`);
    expect(tooDeep.status).toBe(400);
    expect(JSON.stringify(tooDeep.body)).toContain('nested deeper than 32 levels');
    const big = await post(
      '/webhooks/tickets/acme',
      JSON.stringify({
        v: 1,
        eventId: 'ev-8',
        ticket: { ...sampleTicket('W-8'), body: 'x'.repeat(1.1 * 1024 * 1024) },
      }),
    );
    expect(big).toMatchObject({ status: 413, body: { error: 'too_large', limit: '1mb' } });
  });

  it("an agent's own webhook is mounted from its intake, signed and deduplicated like the built-in ones", async () => {
    // How many times the intake reads a request's input (its schema, then its subject key).
    let reads = 0;
    const orders = defineAgent<{ order: string }>({
      name: 'orders',
      version: 'orders@1',
      input: z.object({ order: z.string() }).strict(),
      tools: [],
      instructions: () => 'help with the order',
      key: (i) => (reads++, i.order),
      intake: {
        webhooks: {
          'order-events': {
            summary: 'An order event.',
            body: z.object({ delivery: z.string(), order: z.string() }).strict(),
            event: (b: { delivery: string; order: string }) => ({ id: b.delivery, input: { order: b.order } }),
          },
        },
      },
    });
    const ctx = await createContext(h.cfg, 'webhooks-own', { log: h.ctx.log, metrics: newMetrics(), agents: [orders] });
    const server = await new Promise<Server>((resolve) => {
      const s = createFullApi(ctx, () => true).listen(0, '127.0.0.1', () => resolve(s));
    });
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const raw = JSON.stringify({ delivery: 'd-1', order: 'O-9' });
      const first = await post('/webhooks/order-events/acme', raw, { url });
      expect(first.status).toBe(201);
      // Read once: the run id the event's record names and the run started are one reading of the request.
      expect(reads).toBe(1);
      expect(await ctx.redis.hget(ctx.keys.run(first.body.runId as string).run, 'agent')).toBe('orders');
      expect((await post('/webhooks/order-events/acme', raw, { url })).body).toMatchObject({ duplicate: true });
      const bad = await post('/webhooks/order-events/acme', JSON.stringify({ delivery: 'd-2', order: 1 }), { url });
      expect(bad.status).toBe(400);
      expect(JSON.stringify(bad.body)).toContain('"path":"order"');
      // The built-in agent's webhooks belong to the built-in agent: a deployment without it does not serve them.
      expect((await fetch(`${url}/webhooks/tickets/acme`, { method: 'POST', body: '{}' })).status).toBe(404);
    } finally {
      server.close();
      await ctx.close();
    }
  });
});
