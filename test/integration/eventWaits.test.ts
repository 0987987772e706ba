/**
 * Event waits, sleeps and webhooks at their edges, over the real API (HTTP) with a real worker on real Redis, for two
 * agents of one tenant that name the same keys: the support agent (`reply:<ticket>`, signed `/webhooks/tickets`)
 * and an `orders` agent (`reply:<order>`, signed `/webhooks/orders`, a sleep tool).
 *
 * - A run that ends while it waits (cancelled, stopped by its budget) leaves its key free: the reply starts a
 *   follow-up run, and a later wait on the key parks instead of `event_key_busy`.
 * - Wait keys and webhook event ids are the agent's and the hook's: another agent's reply or event never lands on
 *   them.
 * - POST /v1/events takes an `eventId`: the sender's retry is answered as the first time and delivers nothing.
 * - Kept deliveries are capped per tenant (count and bytes) and payloads in size: 429 / 413 naming the limit,
 *   nothing written.
 * - A sleep no date can hold is the model's format error, never a failed run.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Command, Redis } from 'ioredis';
import { z } from 'zod';
import { defineAgent, defineWaitTool, type Agent } from '../../src/core/agent.js';
import type { ObservationEntry } from '../../src/core/journal.js';
import { newMetrics } from '../../src/metrics/metrics.js';
import { postSigned } from '../support/webhooks.js';
import { deliverToWait } from '../../src/producer/events.js';
import type { EngineContext } from '../../src/runs/engineContext.js';
import { createContext } from '../../src/server/buildContext.js';
import { createHarness, producerAuth, type Harness } from '../../testkit/harness.js';
import { keySet, keysAddedSince } from '../../testkit/keyPrefix.js';

const SECRET = 'acme-webhook-secret';
const OPERATOR_TOKEN = 'operator-token-for-tests';
const usage = { promptTokens: 50, completionTokens: 5 };

const orders: Agent = defineAgent<{ order: string }>({
  name: 'orders',
  version: 'orders@1',
  input: z.object({ order: z.string() }).strict(),
  instructions: () => 'Help with the order.',
  key: (i) => i.order,
  tools: [
    defineWaitTool({
      name: 'wait_for_reply',
      description: 'Wait for the reply on the order.',
      args: z.object({ order: z.string() }).strict(),
      wait: ({ order }) => ({ kind: 'event', key: `reply:${order}`, timeoutMs: 3600_000 }),
    }),
    defineWaitTool({
      name: 'nap',
      description: 'Sleep for ms.',
      args: z.object({ ms: z.number() }).strict(),
      wait: ({ ms }) => ({ kind: 'sleep', forMs: ms }),
    }),
    defineWaitTool({
      name: 'nap_until',
      description: 'Sleep until a time.',
      args: z.object({ at: z.number() }).strict(),
      wait: ({ at }) => ({ kind: 'sleep', untilMs: at }),
    }),
  ],
  intake: {
    webhooks: {
      orders: {
        summary: 'An order event.',
        body: z.object({ delivery: z.string(), order: z.string() }).strict(),
        event: (b: { delivery: string; order: string }) => ({ id: b.delivery, input: { order: b.order } }),
      },
    },
  },
});

let h: Harness;
let ctx: EngineContext;
let url: string;
beforeAll(async () => {
  h = await createHarness('event-waits', {
    WEBHOOK_SECRETS: JSON.stringify({ acme: SECRET }),
    OPERATOR_TOKEN,
    EVENT_PAYLOAD_MAX_BYTES: '1000',
    EVENT_KEPT_MAX_PER_TENANT: '3',
    EVENT_KEPT_MAX_BYTES_PER_TENANT: '2500',
  });
  ctx = await createContext(h.cfg, 'event-waits-agents', {
    log: h.ctx.log,
    metrics: newMetrics(),
    agents: [h.ctx.agents.get('support')!, orders],
  });
  await h.startWorker({}, ctx);
  url = (await h.startApi(ctx)).url;
});
afterAll(async () => {
  await h.close();
});

async function call(path: string, body: unknown, auth: Record<string, string> = producerAuth) {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...auth },
    body: JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
}

const signed = (path: string, body: unknown) => postSigned(`${url}${path}`, SECRET, body);

const ticketEvent = (eventId: string, id: string, body: string) => ({
  v: 1,
  eventId,
  ticket: { id, subject: 'My order', body, customer: { email: 'ada@example.com', name: 'Ada' } },
});

/** An orders run whose scripted model calls `first`, then answers. */
async function startOrders(order: string, first: { name: string; args: unknown }, event: string): Promise<string> {
  const script = [
    { toolCalls: [first], usage },
    { toolCalls: [], final: 'done', usage },
  ];
  const res = await fetch(`${url}/v1/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': event, ...producerAuth },
    body: JSON.stringify({ tenant: 'acme', agent: 'orders', input: { order }, model: 'scripted', script }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { runId: string }).runId;
}

/** A support run on `ticket` whose scripted model waits for the reply, within `budget`. */
async function startSupportWait(ticket: string, event: string, budget?: { maxSteps: number }): Promise<string> {
  const script = [
    { toolCalls: [{ name: 'wait_for_reply', args: { hours: 1 } }], usage },
    { toolCalls: [], final: 'done', usage },
  ];
  const res = await fetch(`${url}/v1/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': event, ...producerAuth },
    body: JSON.stringify({
      tenant: 'acme',
      ticket: {
        id: ticket,
        subject: 'My order',
        body: 'Where is it?',
        customer: { email: 'ada@example.com', name: 'Ada' },
      },
      ...(budget ? { budget } : {}),
      agent: { model: 'scripted', script },
    }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { runId: string }).runId;
}

const ENDED = ['completed', 'failed', 'budget_exceeded', 'cancelled', 'needs_human'];

async function observations(runId: string): Promise<ObservationEntry[]> {
  return (await ctx.store.transcript(runId)).filter((e): e is ObservationEntry => e.kind === 'observation');
}

describe('a run that ends while it waits frees its key', () => {
  it('cancelled: the reply starts a follow-up run, as after a timeout', async () => {
    const first = await signed('/webhooks/tickets?tenant=acme', ticketEvent('ev-c1', 'EW-C1', ''));
    expect(first.status).toBe(201);
    const runId = first.body.runId as string;
    expect(await h.waitForStatus(runId, ['waiting_event', ...ENDED])).toBe('waiting_event');
    const cancel = await call(`/v1/runs/${runId}/cancel`, {}, { authorization: `Bearer ${OPERATOR_TOKEN}` });
    expect(cancel).toMatchObject({ status: 200, body: { status: 'cancelled', cancelled: 'now' } });

    const reply = await signed('/webhooks/tickets?tenant=acme', ticketEvent('ev-c2', 'EW-C1', 'Order 77, it broke.'));
    expect(reply).toMatchObject({ status: 201, body: { created: true, previousRunId: runId } });
    expect(await h.waitForStatus(reply.body.runId as string, ENDED)).toBe('completed');
  });

  it('stopped by its budget: a later wait on the key parks, and the reply goes to that wait', async () => {
    const stopped = await startSupportWait('EW-B1', 'ev-b1', { maxSteps: 1 });
    expect(await h.waitForStatus(stopped, ENDED)).toBe('budget_exceeded');

    const next = await startSupportWait('EW-B1', 'ev-b2');
    expect(await h.waitForStatus(next, ['waiting_event', ...ENDED])).toBe('waiting_event');
    const reply = await signed('/webhooks/tickets?tenant=acme', ticketEvent('ev-b3', 'EW-B1', 'Size M.'));
    expect(reply).toMatchObject({ status: 202, body: { runId: next, resumed: true } });
    expect(await h.waitForStatus(next, ENDED)).toBe('completed');
    const waited = (await observations(next)).filter((o) => o.tool === 'wait_for_reply');
    expect(waited.map((o) => o.output)).toEqual([{ event: { message: 'Size M.' } }]);
  });
});

describe('keys and event ids belong to their agent and hook', () => {
  it("another agent's reply on the same key starts its own run; the waiting run keeps its wait", async () => {
    const waiting = await startOrders('EW-K1', { name: 'wait_for_reply', args: { order: 'EW-K1' } }, 'ev-k0');
    expect(await h.waitForStatus(waiting, ['waiting_event', ...ENDED])).toBe('waiting_event');

    const ticket = await signed('/webhooks/tickets?tenant=acme', ticketEvent('ev-k1', 'EW-K1', 'Hello'));
    expect(ticket).toMatchObject({ status: 201, body: { created: true } });
    expect(ticket.body.runId).not.toBe(waiting);
    expect(await ctx.redis.hget(ctx.keys.run(waiting).run, 'status')).toBe('waiting_event');

    const own = await call('/v1/events', { tenant: 'acme', agent: 'orders', key: 'reply:EW-K1', payload: 'ok' });
    expect(own).toMatchObject({ status: 202, body: { outcome: 'resumed', runId: waiting } });
    expect(await h.waitForStatus(waiting, ENDED)).toBe('completed');
  });

  it('the same event id on two hooks is two events, two runs', async () => {
    const order = await signed('/webhooks/orders?tenant=acme', { delivery: 'E-77', order: 'EW-H1' });
    expect(order).toMatchObject({ status: 201, body: { created: true } });
    const ticket = await signed('/webhooks/tickets?tenant=acme', ticketEvent('E-77', 'EW-H2', 'The mug broke.'));
    expect(ticket).toMatchObject({ status: 201, body: { created: true, duplicate: false } });
    expect(ticket.body.runId).not.toBe(order.body.runId);
    // Each hook still deduplicates its own events.
    const again = await signed('/webhooks/orders?tenant=acme', { delivery: 'E-77', order: 'EW-H1' });
    expect(again).toMatchObject({ status: 200, body: { runId: order.body.runId, duplicate: true } });
  });

  it('POST /v1/events names an agent this deployment runs (400 naming `agent`, nothing written)', async () => {
    const res = await call('/v1/events', { tenant: 'acme', agent: 'nobody', key: 'reply:x', payload: 1 });
    expect(res).toMatchObject({ status: 400, body: { fields: [{ path: 'agent' }] } });
    expect(await ctx.redis.exists(ctx.keys.eventKey('acme', 'nobody', 'reply:x'))).toBe(0);
  });

  it('POST /v1/events checks tenant, agent and key against their formats: 400 naming the field, nothing written', async () => {
    const good = { tenant: 'acme', agent: 'orders', key: 'reply:EW-F1', payload: 1 };
    const before = await keySet(ctx.redis, h.cfg.KEY_PREFIX, h.cfg.BULL_PREFIX);
    for (const [field, value] of [
      ['tenant', '\u0000 ☃ {x}:*'],
      ['tenant', 'acme:*'],
      ['tenant', ''],
      ['agent', '<b>x</b>'],
      ['key', 'reply:\u0000'],
      ['key', 'reply to 1'],
      ['key', 'k'.repeat(201)],
    ] as const) {
      const res = await call('/v1/events', { ...good, [field]: value });
      expect(res.status, `${field} ${value}`).toBe(400);
      expect(res.body.fields, `${field} ${value}`).toEqual([{ path: field, message: expect.any(String) }]);
      expect(JSON.stringify(res.body)).not.toContain(value || '""');
      const asked = { ...good, [field]: value };
      expect(await ctx.redis.exists(ctx.keys.eventKey(asked.tenant, asked.agent, asked.key))).toBe(0);
      expect(await ctx.redis.exists(ctx.keys.keptDeliveries(asked.tenant).set)).toBe(0);
    }
    // No event key, kept delivery or event id at all (the worker's runs of the tests before may write their own).
    const added = await keysAddedSince(ctx.redis, before, h.cfg.KEY_PREFIX, h.cfg.BULL_PREFIX);
    expect(added.filter((k) => /:(event|kept):\{/.test(k))).toEqual([]);
  });
});

describe('a delivery and the holder of its key', () => {
  it('an event on a key no wait holds is one request; a key held by a run that is gone is freed first', async () => {
    // Its own connection, so that only this delivery's requests are counted (the worker's share the context's).
    const own = (ctx.redis as Redis).duplicate();
    const sent: string[] = [];
    const original = own.sendCommand.bind(own);
    own.sendCommand = (cmd: Command, ...rest: unknown[]) => {
      sent.push(cmd.name.toLowerCase());
      return original(cmd, ...(rest as []));
    };
    const counted = { ...ctx, redis: own };
    const body = { tenant: 'acme', agent: 'orders', payload: { message: 'hi' } };
    try {
      await deliverToWait(counted, { ...body, key: 'reply:EW-FREE-0' }, 'ev-free-0');
      sent.length = 0;
      expect(await deliverToWait(counted, { ...body, key: 'reply:EW-FREE' }, 'ev-free')).toEqual({ kind: 'no_wait' });
      expect(sent).toEqual(['evalsha']);
    } finally {
      own.disconnect();
    }
    // A wait whose run no longer exists: released, never resumed.
    const gone = 'r_000000000000000000000000';
    const key = ctx.keys.eventKey('acme', 'orders', 'reply:EW-GONE');
    await ctx.redis.hset(key, 'state', 'waiting', 'runId', gone, 'waitId', `${gone}:1:c1`);
    expect(await deliverToWait(ctx, { ...body, key: 'reply:EW-GONE' }, 'ev-gone')).toEqual({ kind: 'no_wait' });
    expect(await ctx.redis.hget(key, 'state')).not.toBe('delivered');
  });
});

describe('POST /v1/events with an eventId', () => {
  it("the sender's retry after the run consumed the delivery is answered as the first time, nothing kept", async () => {
    const waiting = await startOrders('EW-I1', { name: 'wait_for_reply', args: { order: 'EW-I1' } }, 'ev-i0');
    expect(await h.waitForStatus(waiting, ['waiting_event', ...ENDED])).toBe('waiting_event');
    const body = { tenant: 'acme', agent: 'orders', key: 'reply:EW-I1', payload: { size: 'M' }, eventId: 'snd-1' };
    expect(await call('/v1/events', body)).toMatchObject({ status: 202, body: { outcome: 'resumed', runId: waiting } });
    expect(await h.waitForStatus(waiting, ENDED)).toBe('completed');

    const retry = await call('/v1/events', body);
    expect(retry).toMatchObject({ status: 200, body: { outcome: 'resumed', runId: waiting, duplicate: true } });
    // Nothing kept: the next wait on the key parks instead of taking the stale payload at once.
    const next = await startOrders('EW-I1', { name: 'wait_for_reply', args: { order: 'EW-I1' } }, 'ev-i1');
    expect(await h.waitForStatus(next, ['waiting_event', ...ENDED])).toBe('waiting_event');
  });
});

describe('kept deliveries are bounded', () => {
  const keep = (tenant: string, key: string, payload: unknown) =>
    call('/v1/events', { tenant, agent: 'orders', key, payload });

  it('a payload over EVENT_PAYLOAD_MAX_BYTES is 413 naming it, nothing written', async () => {
    const res = await keep('cap-a', 'big', 'x'.repeat(1200));
    expect(res).toMatchObject({
      status: 413,
      body: { error: 'payload_too_large', field: 'payload', limit: 'EVENT_PAYLOAD_MAX_BYTES', max: 1000 },
    });
    expect(await ctx.redis.exists(ctx.keys.eventKey('cap-a', 'orders', 'big'))).toBe(0);
  });

  it("past a tenant's count or bytes the delivery is 429 naming the limit, nothing written; other tenants keep", async () => {
    for (const k of ['n1', 'n2', 'n3'])
      expect(await keep('cap-n', k, k)).toMatchObject({ status: 202, body: { outcome: 'kept' } });
    const fourth = await keep('cap-n', 'n4', 'n4');
    expect(fourth).toMatchObject({
      status: 429,
      body: { error: 'kept_deliveries_limit', limit: 'EVENT_KEPT_MAX_PER_TENANT', max: 3 },
    });
    expect(Number(fourth.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await ctx.redis.exists(ctx.keys.eventKey('cap-n', 'orders', 'n4'))).toBe(0);

    const kb = 'y'.repeat(900);
    expect((await keep('cap-b', 'b1', kb)).status).toBe(202);
    expect((await keep('cap-b', 'b2', kb)).status).toBe(202);
    const over = await keep('cap-b', 'b3', kb);
    expect(over).toMatchObject({
      status: 429,
      body: { error: 'kept_deliveries_limit', limit: 'EVENT_KEPT_MAX_BYTES_PER_TENANT', max: 2500 },
    });
    expect(await ctx.redis.exists(ctx.keys.eventKey('cap-b', 'orders', 'b3'))).toBe(0);
    // A duplicate of a kept delivery gives its room back.
    expect((await keep('cap-b', 'b1', 'z')).status).toBe(409);
    expect((await keep('cap-c', 'c1', kb)).status).toBe(202);

    const metrics = await ctx.metrics.registry.getSingleMetricAsString('agent_waits_total');
    expect(metrics).toContain('outcome="delivery_refused_kept_count"');
    expect(metrics).toContain('outcome="delivery_refused_kept_bytes"');
    expect(metrics).toContain('outcome="delivery_refused_payload_size"');
  });
});

describe('a sleep no date can hold', () => {
  it.each([
    ['nap', { ms: 1e308 }],
    ['nap_until', { at: 9e15 }],
  ])('%s %j is a format error the model sees, and the run goes on', async (name, args) => {
    const runId = await startOrders(`EW-S-${name}`, { name, args }, `ev-s-${name}`);
    expect(await h.waitForStatus(runId, ENDED)).toBe('completed');
    const [obs] = await observations(runId);
    expect(obs).toMatchObject({ tool: name, status: 'format_error', output: { error: 'invalid_wait' } });
  });
});
