/**
 * Contract tests: each vendor's documented request and response examples
 * (test/fixtures/vendors/*, from the public API references) pinned against
 * both sides of the wire:
 *  - the adapter (src/agents/support/vendors) sends the documented request
 *    (method, path, auth, content type, Idempotency-Key, body fields) and reads
 *    the documented response and error bodies, served by a recorder over real HTTP;
 *  - the sandbox answers the documented request with the documented response
 *    shape (every documented field present, with the documented JSON type) and
 *    the documented status, replay marker and error bodies.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startSandbox, type SandboxHandle } from '../../sandbox/server.js';
import { ZendeskClient } from '../../src/agents/support/vendors/zendesk.js';
import { ResendClient } from '../../src/agents/support/vendors/resend.js';
import { StripeClient } from '../../src/agents/support/vendors/stripe.js';
import { KeyConflictError } from '../../src/core/errors.js';

type Json = Record<string, any>;
const fixture = (name: string): Json =>
  JSON.parse(readFileSync(new URL(`../fixtures/vendors/${name}.json`, import.meta.url), 'utf8')) as Json;

/** Where `got` departs from the documented shape of `doc`: missing fields, other JSON types (null matches anything). */
function shapeDiff(doc: unknown, got: unknown, path = '$'): string[] {
  if (doc === null || got === null) return [];
  if (Array.isArray(doc)) {
    if (!Array.isArray(got)) return [`${path}: array expected`];
    return doc.length > 0 && got.length > 0 ? shapeDiff(doc[0], got[0], `${path}[0]`) : [];
  }
  if (typeof doc === 'object') {
    if (typeof got !== 'object' || Array.isArray(got)) return [`${path}: object expected`];
    return Object.entries(doc as Json).flatMap(([k, v]) =>
      k in (got as Json) ? shapeDiff(v, (got as Json)[k], `${path}.${k}`) : [`${path}.${k}: missing`],
    );
  }
  return typeof doc === typeof got ? [] : [`${path}: ${typeof doc} expected, got ${typeof got}`];
}

interface Recorded {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingMessage['headers'];
  body: string;
}

/** A server that records each request and answers the next queued documented response. */
let recorder: Server;
let recorderUrl: string;
let recorded: Recorded[] = [];
let answers: { status: number; headers?: Record<string, string>; body: unknown }[] = [];
let sb: SandboxHandle;

beforeAll(async () => {
  recorder = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://x');
      recorded.push({
        method: req.method ?? '',
        path: url.pathname,
        query: url.searchParams,
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      });
      const a = answers.shift() ?? { status: 500, body: { error: 'no answer queued' } };
      res.writeHead(a.status, { 'content-type': 'application/json', ...a.headers });
      res.end(JSON.stringify(a.body));
    });
  });
  await new Promise<void>((r) => recorder.listen(0, '127.0.0.1', r));
  recorderUrl = `http://127.0.0.1:${(recorder.address() as AddressInfo).port}`;
  sb = await startSandbox({ port: 0 });
});
afterAll(async () => {
  await new Promise((r) => recorder.close(r));
  await sb.close();
});
beforeEach(() => {
  recorded = [];
  answers = [];
  sb.reset();
});

const signal = () => new AbortController().signal;
const zendesk = (baseUrl: string) =>
  new ZendeskClient({
    baseUrl,
    auth: { kind: 'api_token', email: 'agent@example.com', token: 'tok' },
    timeoutMs: 5000,
  });
const resend = (baseUrl: string) =>
  new ResendClient({ baseUrl, apiKey: 're_123456789', from: 'Acme <onboarding@resend.dev>', timeoutMs: 5000 });
const stripe = (baseUrl: string) =>
  new StripeClient({ baseUrl, apiKey: 'sk_test_4eC39HqLyjWDarjtT1zdp7dc', timeoutMs: 5000 });

describe('Zendesk: create ticket', () => {
  const f = fixture('zendesk/create-ticket');
  const t = f.request.body.ticket;

  it('the adapter sends the documented request and reads the documented 201, miss and hit', async () => {
    answers.push(f.response, { ...f.response, headers: f.replay.headers });
    const create = () => zendesk(recorderUrl).createTicket(t, { idempotencyKey: 'key-1', signal: signal() });
    const first = await create();
    expect(first).toMatchObject({
      ticket: { id: f.response.body.ticket.id, external_id: t.external_id },
      replayed: false,
    });
    expect((await create()).replayed).toBe(true);
    const r = recorded[0]!;
    expect([r.method, r.path]).toEqual([f.request.method, f.request.path]);
    expect(r.headers['content-type']).toBe('application/json');
    expect(r.headers['idempotency-key']).toBe('key-1');
    expect(Buffer.from(String(r.headers.authorization).replace(/^Basic /, ''), 'base64').toString()).toBe(
      'agent@example.com/token:tok',
    );
    expect(shapeDiff(f.request.body, JSON.parse(r.body))).toEqual([]);
  });

  it('the adapter reads the documented key mismatch as a conflict', async () => {
    answers.push(f.keyMismatch);
    await expect(
      zendesk(recorderUrl).createTicket(t, { idempotencyKey: 'key-1', signal: signal() }),
    ).rejects.toBeInstanceOf(KeyConflictError);
  });

  it('the sandbox answers the documented request with the documented shapes, marker and mismatch', async () => {
    const post = (body: unknown) =>
      fetch(`${sb.url}${f.request.path}`, {
        method: 'POST',
        body: JSON.stringify(body),
        headers: {
          'content-type': 'application/json',
          'idempotency-key': 'key-1',
          authorization: `Basic ${Buffer.from('agent@example.com/token:tok').toString('base64')}`,
        },
      });
    const res = await post(f.request.body);
    expect(res.status).toBe(f.response.status);
    expect(res.headers.get('x-idempotency-lookup')).toBe(f.response.headers['x-idempotency-lookup']);
    expect(shapeDiff(f.response.body, await res.json())).toEqual([]);
    expect((await post(f.request.body)).headers.get('x-idempotency-lookup')).toBe(
      f.replay.headers['x-idempotency-lookup'],
    );
    const other = await post({ ticket: { ...t, subject: 'Another subject' } });
    expect(other.status).toBe(f.keyMismatch.status);
    expect(await other.json()).toEqual(f.keyMismatch.body);
  });
});

describe('Zendesk: list by external_id, add a comment', () => {
  const list = fixture('zendesk/list-by-external-id');
  const comment = fixture('zendesk/add-comment');

  it('the adapter sends the documented requests and reads the documented answers', async () => {
    answers.push(list.response, comment.response, comment.notFound);
    const client = zendesk(recorderUrl);
    const found = await client.ticketsByExternalId(list.request.query.external_id, { signal: signal() });
    expect(found.map((x) => x.id)).toEqual([35436]);
    expect(recorded[0]!.path).toBe(list.request.path);
    expect(recorded[0]!.query.get('external_id')).toBe(list.request.query.external_id);
    const updated = await client.addComment(35436, comment.request.body.ticket.comment, { signal: signal() });
    expect(updated.id).toBe(35436);
    expect([recorded[1]!.method, recorded[1]!.path]).toEqual([comment.request.method, comment.request.path]);
    expect(JSON.parse(recorded[1]!.body)).toEqual(comment.request.body);
    expect(await client.getTicket(1, { signal: signal() })).toBeUndefined();
  });

  it('the sandbox answers them with the documented shapes and errors', async () => {
    const auth = { authorization: `Basic ${Buffer.from('agent@example.com/token:tok').toString('base64')}` };
    await fetch(`${sb.url}/api/v2/tickets.json`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({
        ticket: {
          subject: 'My printer is on fire!',
          comment: { body: 'x' },
          external_id: list.request.query.external_id,
        },
      }),
    });
    const listed = await (
      await fetch(`${sb.url}${list.request.path}?external_id=${list.request.query.external_id}`, { headers: auth })
    ).json();
    expect(shapeDiff(list.response.body, listed)).toEqual([]);
    const id = (listed as Json).tickets[0].id as number;
    const put = await fetch(`${sb.url}/api/v2/tickets/${id}.json`, {
      method: 'PUT',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify(comment.request.body),
    });
    expect(put.status).toBe(comment.response.status);
    expect(shapeDiff(comment.response.body, await put.json())).toEqual([]);
    const missing = await fetch(`${sb.url}/api/v2/tickets/999999.json`, { headers: auth });
    expect([missing.status, await missing.json()]).toEqual([comment.notFound.status, comment.notFound.body]);
    const denied = await fetch(`${sb.url}/api/v2/tickets/${id}.json`);
    expect([denied.status, await denied.json()]).toEqual([comment.unauthorized.status, comment.unauthorized.body]);
  });
});

describe('Resend: send and retrieve an email', () => {
  const f = fixture('resend/send-email');
  const got = fixture('resend/get-email');
  const email = { to: f.request.body.to, subject: f.request.body.subject, html: f.request.body.html };

  it('the adapter sends the documented request and reads the documented answers and errors', async () => {
    answers.push(f.response, got.response, f.keyMismatch, f.concurrent);
    const client = resend(recorderUrl);
    expect(await client.send(email, { idempotencyKey: 'key-1', signal: signal() })).toEqual(f.response.body);
    const r = recorded[0]!;
    expect([r.method, r.path]).toEqual([f.request.method, f.request.path]);
    expect(r.headers.authorization).toBe(f.request.headers.authorization);
    expect(r.headers['idempotency-key']).toBe('key-1');
    expect(JSON.parse(r.body)).toEqual(f.request.body);
    expect(await client.get(got.response.body.id, { signal: signal() })).toMatchObject({
      object: 'email',
      id: got.response.body.id,
    });
    expect(recorded[1]!.path).toBe(got.request.path);
    await expect(client.send(email, { idempotencyKey: 'key-1', signal: signal() })).rejects.toBeInstanceOf(
      KeyConflictError,
    );
    await expect(client.send(email, { idempotencyKey: 'key-1', signal: signal() })).rejects.toMatchObject({
      details: { reason: 'in_progress' },
    });
  });

  it('the sandbox answers with the documented shapes: the same id on a replay, the documented errors', async () => {
    const post = (
      body: unknown,
      headers: Record<string, string> = { authorization: f.request.headers.authorization },
    ) =>
      fetch(`${sb.url}/emails`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': 'key-1', ...headers },
        body: JSON.stringify(body),
      });
    const res = await post(f.request.body);
    expect(res.status).toBe(f.response.status);
    const sent = (await res.json()) as { id: string };
    expect(shapeDiff(f.response.body, sent)).toEqual([]);
    expect(await (await post(f.request.body)).json()).toEqual(sent);
    const other = await post({ ...f.request.body, subject: 'other' });
    expect([other.status, await other.json()]).toEqual([f.keyMismatch.status, f.keyMismatch.body]);
    const noKey = await post(f.request.body, {});
    expect([noKey.status, await noKey.json()]).toEqual([f.missingKey.status, f.missingKey.body]);
    const { from: _from, ...noFrom } = f.request.body;
    const missing = await fetch(`${sb.url}/emails`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: f.request.headers.authorization },
      body: JSON.stringify(noFrom),
    });
    expect([missing.status, await missing.json()]).toEqual([f.missingField.status, f.missingField.body]);
    const read = await fetch(`${sb.url}/emails/${sent.id}`, {
      headers: { authorization: f.request.headers.authorization },
    });
    expect(read.status).toBe(got.response.status);
    expect(shapeDiff(got.response.body, await read.json())).toEqual([]);
  });
});

describe('Stripe: create and list refunds', () => {
  const f = fixture('stripe/create-refund');
  const list = fixture('stripe/list-refunds');
  const refund = {
    paymentIntent: f.request.form.payment_intent,
    amount: 1000,
    currency: 'usd',
    reason: 'requested_by_customer' as const,
    metadata: { action_id: f.request.form['metadata[action_id]'] },
  };

  it('the adapter sends the documented form and reads the documented refund, replay marker, list and errors', async () => {
    answers.push(f.response, { ...f.response, headers: f.replay.headers }, list.response, f.keyMismatch);
    const client = stripe(recorderUrl);
    expect(await client.createRefund(refund, { idempotencyKey: 'key-1', signal: signal() })).toMatchObject({
      refund: { id: f.response.body.id },
      replayed: false,
    });
    expect((await client.createRefund(refund, { idempotencyKey: 'key-1', signal: signal() })).replayed).toBe(true);
    const r = recorded[0]!;
    expect([r.method, r.path]).toEqual([f.request.method, f.request.path]);
    expect(r.headers['content-type']).toBe(f.request.headers['content-type']);
    expect(r.headers.authorization).toBe(f.request.headers.authorization);
    expect(Object.fromEntries(new URLSearchParams(r.body))).toEqual(f.request.form);
    const refunds = await client.refundsForPayment(list.request.query.payment_intent, { signal: signal() });
    expect(refunds.map((x) => x.metadata.action_id)).toEqual([f.request.form['metadata[action_id]']]);
    expect(Object.fromEntries(recorded[2]!.query)).toEqual(list.request.query);
    await expect(client.createRefund(refund, { idempotencyKey: 'key-1', signal: signal() })).rejects.toBeInstanceOf(
      KeyConflictError,
    );
  });

  it('the sandbox answers the documented form with the documented shapes, marker, list and errors', async () => {
    const post = (form: Record<string, string>, headers: Record<string, string> = {}) =>
      fetch(`${sb.url}/v1/refunds`, {
        method: 'POST',
        headers: {
          'content-type': f.request.headers['content-type'],
          authorization: f.request.headers.authorization,
          'idempotency-key': 'key-1',
          ...headers,
        },
        body: new URLSearchParams(form).toString(),
      });
    const res = await post(f.request.form);
    expect(res.status).toBe(f.response.status);
    expect(res.headers.get('idempotent-replayed')).toBeNull();
    const body = await res.json();
    expect(shapeDiff(f.response.body, body)).toEqual([]);
    const again = await post(f.request.form);
    expect(again.headers.get('idempotent-replayed')).toBe(f.replay.headers['idempotent-replayed']);
    expect(await again.json()).toEqual(body);
    const other = await post({ ...f.request.form, amount: '2000' });
    expect(other.status).toBe(f.keyMismatch.status);
    expect(shapeDiff(f.keyMismatch.body, await other.json())).toEqual([]);
    sb.setFaults([{ kind: 'rate_limit', resource: 'refunds', count: 1 }]);
    const limited = await post(f.request.form, { 'idempotency-key': 'key-2' });
    expect(limited.status).toBe(f.rateLimited.status);
    expect(await limited.json()).toMatchObject({
      error: { type: f.rateLimited.body.error.type, code: f.rateLimited.body.error.code },
    });
    const listed = await (
      await fetch(`${sb.url}/v1/refunds?${new URLSearchParams(list.request.query)}`, {
        headers: { authorization: f.request.headers.authorization },
      })
    ).json();
    expect(shapeDiff(list.response.body, listed)).toEqual([]);
  });
});
