/**
 * Each vendor adapter through the effect ledger, against the sandbox over real
 * HTTP and real Redis: a 429 then success is one write, and a doubt is settled
 * (lost response after commit -> confirmed with the service's id, no second
 * effect; never committed -> one more request with the same key; undecidable
 * or past the key window -> the human queue), plus the vendor faults: Zendesk's
 * 500 after create and its lagging list, a same-key conflict, a replay marker.
 *
 * The runner is driven directly (one write tool call, as a step makes it); the
 * "past the window" cases call reconcile() with a clock past the window the
 * ledger recorded at dispatch, while the sandbox's clock has moved a day too, so
 * a re-send would really be a second effect.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createHarness, sampleTicket, supportTool, type Harness } from '../../testkit/harness.js';
import { buildSpec } from '../../src/producer/intake.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { createEffectRunner } from '../../src/ledger/runner.js';
import { reconcile } from '../../src/ledger/reconcile.js';
import { actionIdentity } from '../../src/ledger/identity.js';
import type { ToolContext, WriteTool } from '../../src/core/tool.js';
import type { EffectResource, FaultRule } from '../../sandbox/types.js';

let h: Harness;
let ledger: Ledger;
beforeAll(async () => {
  h = await createHarness('vendors', { RECONCILE_DEADLINE_MS: '400', RECONCILE_POLL_MS: '20' });
  ledger = new Ledger(h.ctx.redis, h.ctx.keys);
});
afterAll(async () => {
  await h.close();
});
beforeEach(() => h.sandbox.reset());

interface Vendor {
  tool: string;
  resource: EffectResource;
  args: Record<string, unknown>;
  other: Record<string, unknown>;
  receipt: RegExp;
}

const VENDORS: Vendor[] = [
  {
    tool: 'create_ticket',
    resource: 'tickets',
    receipt: /^\d+$/,
    args: { subject: 'Follow-up', body: 'Broken mug', priority: 'normal', sourceTicketId: 'T-1' },
    other: { subject: 'Follow-up', body: 'Another wording', priority: 'high', sourceTicketId: 'T-1' },
  },
  {
    tool: 'send_email',
    resource: 'emails',
    receipt: /^[0-9a-f-]{36}$/,
    args: { to: 'ada@example.com', template: 'ack', subject: 'Re: broken mug', body: 'We are on it.' },
    other: { to: 'ada@example.com', template: 'ack', subject: 'Re: broken mug', body: 'Other words.' },
  },
  {
    tool: 'refund',
    resource: 'refunds',
    receipt: /^re_/,
    args: { orderId: 'pi_order_1', amountCents: 1500, currency: 'EUR', reason: 'broken mug' },
    other: { orderId: 'pi_order_1', amountCents: 1500, currency: 'EUR', reason: 'changed reason' },
  },
];

let seq = 0;
async function setup(v: Vendor, faults: FaultRule[] = []) {
  h.sandbox.setFaults(faults);
  const spec = buildSpec(
    h.ctx,
    {
      tenant: 'acme',
      ticket: sampleTicket(`V-${++seq}`),
      agent: {
        model: 'scripted',
        script: [
          { toolCalls: [], final: 'done', usage: { promptTokens: 1, completionTokens: 1 }, transientFailures: 0 },
        ],
      },
    },
    Date.now(),
  );
  await h.ctx.store.create(spec, Date.now());
  const tool = supportTool(h.ctx, v.tool) as WriteTool;
  const ctx: ToolContext = { runId: spec.runId, step: 1, signal: new AbortController().signal, input: spec.input };
  const id = actionIdentity(spec.runId, tool, v.args);
  const run = () =>
    createEffectRunner(h.ctx).run({ tool, args: v.args, call: { id: `call_${seq}` }, ctx, tenant: 'acme' });
  const records = () => h.sandbox.counts().byResource[v.resource];
  const history = async () => (await ledger.history(spec.runId, id.actionId)).map((x) => x.to);
  return { spec, tool, ctx, id, run, records, history };
}

describe.each(VENDORS)('$tool through the ledger', (v) => {
  it('a 429 (Retry-After) then success is exactly one write', async () => {
    const s = await setup(v, [{ kind: 'rate_limit', resource: v.resource, count: 1, retryAfterS: 0 }]);
    const r = await s.run();
    expect(r).toMatchObject({ kind: 'observed', status: 'ok' });
    expect(s.records()).toEqual({ records: 1, byKey: { [s.id.idempotencyKey]: 1 } });
    const rec = await ledger.get(s.spec.runId, s.id.actionId);
    expect(rec).toMatchObject({ state: 'confirmed', attempts: 1 });
    expect(rec?.receipt).toMatch(v.receipt);
  });

  it('the response lost after the commit is confirmed with the service id, no second effect', async () => {
    const s = await setup(v, [{ kind: 'lost_response_after_commit', resource: v.resource, count: 1 }]);
    expect(await s.run()).toMatchObject({ kind: 'observed', status: 'ok' });
    expect(s.records()).toEqual({ records: 1, byKey: { [s.id.idempotencyKey]: 1 } });
    const rec = await ledger.get(s.spec.runId, s.id.actionId);
    expect(await s.history()).toEqual(['planned', 'authorized', 'dispatched', 'outcome_unknown', 'confirmed']);
    expect(rec?.receipt).toMatch(v.receipt);
    const why = (await ledger.history(s.spec.runId, s.id.actionId)).at(-1)?.why;
    // Zendesk is found by external_id; Resend and Stripe answer the same-key replay.
    expect(why).toMatch(v.tool === 'create_ticket' ? /lookup/ : /replay/);
  });

  it('a request that never committed is sent once more with the same key', async () => {
    const s = await setup(v, [{ kind: 'refuse_before_commit', resource: v.resource, count: 1 }]);
    const before = h.sandbox.counts().requests;
    expect(await s.run()).toMatchObject({ kind: 'observed', status: 'ok' });
    expect(s.records()).toEqual({ records: 1, byKey: { [s.id.idempotencyKey]: 1 } });
    expect(await s.history()).toEqual(['planned', 'authorized', 'dispatched', 'outcome_unknown', 'confirmed']);
    // The dropped request, (Zendesk: the lookup that finds nothing,) the same-key re-send.
    expect(h.sandbox.counts().requests - before).toBe(v.tool === 'create_ticket' ? 3 : 2);
  });

  it('undecidable (no answer about the earlier request) goes to the human queue', async () => {
    const s = await setup(v, [
      { kind: 'lost_response_after_commit', resource: v.resource, count: 1 },
      { kind: 'no_lookup', resource: v.resource },
    ]);
    const r = await s.run();
    expect(r).toMatchObject({ kind: 'park', status: 'needs_human' });
    expect(await s.history()).toEqual(['planned', 'authorized', 'dispatched', 'outcome_unknown', 'needs_human']);
    const queue = await h.ctx.redis.zrange(h.ctx.keys.humanQueue(h.ctx.keys.shardOf(s.spec.runId)), 0, -1);
    expect(queue).toContain(s.id.actionId);
    expect(s.records().records).toBe(1);
  });

  it('the same key held for another request is a conflict: to a person at once, never retried', async () => {
    const s = await setup(v);
    const ctx = s.ctx;
    // Another sender used this action's key with a different body.
    await s.tool.dispatch(v.other, ctx, {
      actionId: s.id.actionId,
      idempotencyKey: s.id.idempotencyKey,
      requestId: 'rq_other',
      timeoutMs: 5000,
      signal: ctx.signal,
    });
    const before = h.sandbox.counts().requests;
    const r = await s.run();
    expect(r).toMatchObject({ kind: 'park', status: 'needs_human' });
    expect(await s.history()).toEqual(['planned', 'authorized', 'dispatched', 'outcome_unknown', 'needs_human']);
    expect((await ledger.history(s.spec.runId, s.id.actionId)).at(-1)?.why).toMatch(/conflict/);
    expect(h.sandbox.counts().requests - before).toBe(1);
    expect(s.records().records).toBe(1);
  });
});

/** An action left outcome_unknown by a lost response, as a step leaves it, then reconciled at `now`. */
async function lostThenReconcileAt(v: Vendor, atMs: (replayUntil: number) => number, faults: FaultRule[] = []) {
  const s = await setup(v, [{ kind: 'lost_response_after_commit', resource: v.resource, count: 1 }]);
  // The request whose response is lost, then the ledger as a step leaves it: dispatched (window recorded), outcome_unknown.
  await s.tool
    .dispatch(v.args, s.ctx, {
      actionId: s.id.actionId,
      idempotencyKey: s.id.idempotencyKey,
      requestId: s.id.requestId,
      timeoutMs: 5000,
      signal: s.ctx.signal,
    })
    .catch(() => {});
  await ledger.plan(s.spec.runId, 1, 'call_w', v.tool, s.id, v.args, 'test');
  await ledger.transition(s.spec.runId, s.id.actionId, 'planned', 'authorized', { by: 'test', why: 'test' });
  const dispatchedAt = Date.now();
  const window = v.tool === 'create_ticket' ? 2 * 3600_000 : 24 * 3600_000;
  await ledger.transition(
    s.spec.runId,
    s.id.actionId,
    'authorized',
    'dispatched',
    { by: 'test', why: 'dispatching' },
    { replayUntil: String(dispatchedAt + window) },
    { countAttempt: true },
  );
  await ledger.transition(s.spec.runId, s.id.actionId, 'dispatched', 'outcome_unknown', {
    by: 'test',
    why: 'response lost',
  });
  h.sandbox.setFaults(faults);
  h.sandbox.advanceClock(window + 60_000); // at the service too, the key is past its window
  const rec = (await ledger.get(s.spec.runId, s.id.actionId))!;
  expect(rec.replayUntil).toBe(dispatchedAt + window);
  // A clock that runs, shifted to `atMs` (the reconciliation's own deadline must still come).
  const offset = atMs(rec.replayUntil!) - Date.now();
  const outcome = await reconcile(
    {
      ledger,
      metrics: h.ctx.metrics,
      log: h.ctx.log,
      deadlineMs: 300,
      pollMs: 20,
      minAttemptMs: 100,
      now: () => Date.now() + offset,
    },
    rec,
    s.tool,
    s.ctx,
    'test',
  );
  return { ...s, outcome, last: (await ledger.history(s.spec.runId, s.id.actionId)).at(-1) };
}

describe('past the key window', () => {
  it('Resend: no replay past 24 h (a re-send would be a second email): the human queue, with the reason', async () => {
    const r = await lostThenReconcileAt(VENDORS[1]!, (until) => until + 1);
    expect(r.outcome).toBe('needs_human');
    expect(r.last?.why).toMatch(/key window ended/);
    expect(r.records()).toEqual({ records: 1, byKey: { [r.id.idempotencyKey]: 1 } });
  });

  it("Stripe: past 24 h the payment's refunds are listed and the one carrying the action id confirms it", async () => {
    const r = await lostThenReconcileAt(VENDORS[2]!, (until) => until + 1);
    expect(r.outcome).toBe('confirmed');
    expect(r.last?.why).toMatch(/lookup/);
    expect(r.records().records).toBe(1);
  });

  it('Zendesk: past 2 h, a ticket the list does not show goes to a person, never re-created', async () => {
    const r = await lostThenReconcileAt(VENDORS[0]!, (until) => until + 1, [{ kind: 'list_lag', resource: 'tickets' }]);
    expect(r.outcome).toBe('needs_human');
    expect(r.records()).toEqual({ records: 1, byKey: { [r.id.idempotencyKey]: 1 } });
  });
});

describe('vendor faults', () => {
  it('Zendesk created the ticket but answered 500: found by external_id, one ticket', async () => {
    const s = await setup(VENDORS[0]!, [{ kind: 'error_after_commit', resource: 'tickets', count: 1 }]);
    expect(await s.run()).toMatchObject({ kind: 'observed', status: 'ok' });
    const last = (await ledger.history(s.spec.runId, s.id.actionId)).at(-1);
    expect(last?.why).toMatch(/lookup/);
    expect(last?.evidence).toMatchObject({ query: 'external_id', found: 1 });
    expect(s.records().records).toBe(1);
  });

  it("Zendesk's list does not show the ticket yet: the same-key re-send inside 2 h is answered hit, one ticket", async () => {
    const s = await setup(VENDORS[0]!, [
      { kind: 'lost_response_after_commit', resource: 'tickets', count: 1 },
      { kind: 'list_lag', resource: 'tickets', count: 1 },
    ]);
    expect(await s.run()).toMatchObject({ kind: 'observed', status: 'ok' });
    const last = (await ledger.history(s.spec.runId, s.id.actionId)).at(-1);
    expect(last?.why).toMatch(/replay/);
    expect(last?.evidence).toMatchObject({ replay: true, replayed: true });
    expect(s.records()).toEqual({ records: 1, byKey: { [s.id.idempotencyKey]: 1 } });
  });

  it('a 409 for a concurrent same-key request is waited out, then settled by the replay: one email', async () => {
    const s = await setup(VENDORS[1]!, [
      { kind: 'lost_response_after_commit', resource: 'emails', count: 1 },
      { kind: 'conflict_in_progress', resource: 'emails', count: 2 },
    ]);
    // The first dispatch meets the 409 (in progress: outcome unknown), the first replay too; the next replay settles.
    expect(await s.run()).toMatchObject({ kind: 'observed', status: 'ok' });
    expect(s.records().records).toBe(1);
  });

  it("Stripe's Idempotent-Replayed on a first dispatch counts one duplicate write; the service deduplicated it", async () => {
    const v = VENDORS[2]!;
    const s = await setup(v);
    await s.tool.dispatch(v.args, s.ctx, {
      actionId: s.id.actionId,
      idempotencyKey: s.id.idempotencyKey,
      requestId: 'rq_outside',
      timeoutMs: 5000,
      signal: s.ctx.signal,
    });
    const before =
      (await h.ctx.metrics.duplicateWrites.get()).values.find((x) => x.labels.tool === 'refund')?.value ?? 0;
    expect(await s.run()).toMatchObject({ kind: 'observed', status: 'ok' });
    const after =
      (await h.ctx.metrics.duplicateWrites.get()).values.find((x) => x.labels.tool === 'refund')?.value ?? 0;
    expect(after - before).toBe(1);
    expect(s.records().records).toBe(1);
  });
});
