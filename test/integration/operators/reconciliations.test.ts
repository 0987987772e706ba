/** The human reconciliation queue: an email whose response was lost by a service with no lookup. */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Ledger, type ActionRecord, type HistoryEntry } from '../../../src/ledger/ledger.js';
import type { Harness } from '../../../testkit/harness.js';
import { humanItemSchema } from '../../../src/http/operators/reconciliations.js';
import { call, email, final, operatorHarness, startScripted, turn } from './support.js';

type Item = ActionRecord & { history: HistoryEntry[] };
type CompBody = {
  state: string;
  compensation: string;
  compensationState: string;
  inProgress: boolean;
  run: { status: string; reason: string; ended: boolean };
};

let h: Harness & { url: string };
let ledger: Ledger;
beforeAll(async () => {
  h = await operatorHarness('reconcile', { RECONCILE_DEADLINE_MS: '200', RECONCILE_POLL_MS: '20' });
  ledger = new Ledger(h.ctx.redis, h.ctx.keys);
});
afterAll(async () => {
  await h.close();
});
beforeEach(() => h.sandbox.reset());

async function parkedEmail(): Promise<{ runId: string; item: Item }> {
  h.sandbox.setFaults([
    { kind: 'lost_response_after_commit', resource: 'emails', count: 1 },
    { kind: 'no_lookup', resource: 'emails' },
  ]);
  const runId = await startScripted(h, [turn([email]), final], 'REC');
  expect(await h.waitForStatus(runId, ['needs_human', 'completed', 'failed'])).toBe('needs_human');
  const list = await call<{ reconciliations: Item[] }>(h.url, 'GET', '/v1/reconciliations');
  expect(list.status).toBe(200);
  const item = list.body.reconciliations.find((x) => x.runId === runId);
  expect(item?.state).toBe('needs_human');
  expect(item?.history.map((x) => x.to)).toEqual([
    'planned',
    'authorized',
    'dispatched',
    'outcome_unknown',
    'needs_human',
  ]);
  return { runId, item: item! };
}

const emails = () => h.sandbox.counts().byResource.emails;

describe('reconciliation queue', () => {
  it("each item names its tenant and ticket (the run's subject) and matches its documented schema", async () => {
    const { runId, item } = await parkedEmail();
    const subject = (await h.ctx.store.readSpec(runId))!.key;
    expect(subject).toMatch(/^REC-/);
    expect(item).toMatchObject({ tenant: 'acme', subject });
    const list = await call<{ reconciliations: unknown[] }>(h.url, 'GET', '/v1/reconciliations');
    for (const x of list.body.reconciliations) expect(humanItemSchema.safeParse(x).error).toBeUndefined();
    h.sandbox.clearFaults();
  });

  it('not_sent: the resumed step dispatches once more with the same key', async () => {
    const { runId, item } = await parkedEmail();
    expect(emails().byKey[item.idempotencyKey]).toBe(1);
    // The service answers for its keys again (no_lookup also refuses a known key's re-send).
    h.sandbox.clearFaults();
    const res = await call(h.url, 'POST', `/v1/reconciliations/${item.actionId}`, {
      finding: 'not_sent',
      evidence: { note: 'provider says nothing left' },
      operator: 'olga',
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ state: 'safe_retry', resumed: true });
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('completed');
    const rec = await ledger.get(runId, item.actionId);
    expect(rec?.state).toBe('confirmed');
    expect(rec?.attempts).toBe(2);
    const history = await ledger.history(runId, item.actionId);
    expect(history.map((x) => x.to).slice(-3)).toEqual(['safe_retry', 'dispatched', 'confirmed']);
    expect(history.find((x) => x.to === 'safe_retry')?.by).toBe('operator'); // the authenticated operator (OPERATOR_TOKEN), not the typed name;
    // One more request, with the same key (the sandbox replays it: still one record).
    expect(Object.keys(emails().byKey)).toEqual([item.idempotencyKey]);
    expect(emails().records).toBe(1);
    const again = await call(h.url, 'POST', `/v1/reconciliations/${item.actionId}`, {
      finding: 'not_sent',
      evidence: {},
      operator: 'olga',
    });
    expect(again.status).toBe(409);
  });

  it('confirmed: records the receipt, and the resumed step never resends', async () => {
    const { runId, item } = await parkedEmail();
    const requests = h.sandbox.counts().requests;
    const res = await call(h.url, 'POST', `/v1/reconciliations/${item.actionId}`, {
      finding: 'confirmed',
      receipt: 'em_manual_1',
      evidence: { seenIn: 'provider dashboard' },
      operator: 'olga',
    });
    expect(res.status).toBe(200);
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('completed');
    expect(h.sandbox.counts().requests).toBe(requests);
    const rec = await ledger.get(runId, item.actionId);
    expect(rec).toMatchObject({ state: 'confirmed', receipt: 'em_manual_1', attempts: 1 });
    const list = await call<{ reconciliations: Item[] }>(h.url, 'GET', '/v1/reconciliations');
    expect(list.body.reconciliations.map((x) => x.actionId)).not.toContain(item.actionId);
  });

  it('a confirmed finding without a receipt is refused', async () => {
    const res = await call(h.url, 'POST', '/v1/reconciliations/a_x', {
      finding: 'confirmed',
      evidence: {},
      operator: 'olga',
    });
    expect(res.status).toBe(400);
  });

  it('compensate: a clarification email goes through the ledger to the sandbox once, however often the POST is repeated', async () => {
    const { runId, item } = await parkedEmail();
    const before = h.sandbox.counts().requests;
    const body = { finding: 'compensate', evidence: { customerComplained: true }, operator: 'olga' };
    const path = `/v1/reconciliations/${item.actionId}`;
    // Two operators at once, then a third click later.
    const [a, b] = await Promise.all([
      call<CompBody>(h.url, 'POST', path, body),
      call<CompBody>(h.url, 'POST', path, body),
    ]);
    for (const r of [a, b]) {
      expect([200, 202]).toContain(r.status);
      expect(r.body.state).toBe('compensation_required');
    }
    expect(a.body.compensation).toBe(b.body.compensation);
    const c = await call<CompBody>(h.url, 'POST', path, body);
    expect(c.status).toBe(200);
    expect(c.body).toMatchObject({
      state: 'compensation_required',
      compensation: a.body.compensation,
      compensationState: 'confirmed',
      inProgress: false,
    });

    // Exactly one request reached the service, and it holds one record under the compensation's own key.
    expect(h.sandbox.counts().requests - before).toBe(1);
    const effects = await ledger.listForRun(runId);
    const original = effects.find((e) => e.actionId === item.actionId)!;
    const comp = effects.find((e) => e.actionId === a.body.compensation)!;
    expect(emails().byKey[comp.idempotencyKey]).toBe(1);
    expect(emails().byKey[item.idempotencyKey]).toBe(1);
    expect(emails().records).toBe(2);
    expect(comp.idempotencyKey).not.toBe(item.idempotencyKey);
    expect(comp.idempotencyKey).toContain(':compensate:');

    // Linked both ways; the original's history is kept and only grew.
    expect(original.history.map((x) => x.to)).toEqual([
      'planned',
      'authorized',
      'dispatched',
      'outcome_unknown',
      'needs_human',
      'compensation_required',
    ]);
    expect(original.compensatedBy).toBe(comp.actionId);
    expect(comp).toMatchObject({ state: 'confirmed', compensates: item.actionId, tool: 'send_email', attempts: 1 });
    expect(comp.history.map((x) => x.to)).toEqual(['planned', 'authorized', 'dispatched', 'confirmed']);
    expect(comp.history.slice(0, 2).map((x) => x.by)).toEqual(['operator', 'operator']);

    // The service has the clarification email, to the customer, under the compensation's template.
    const record = (await (
      await fetch(`${h.sandbox.url}/emails/${comp.receipt}`, { headers: { authorization: 'Bearer re_sandbox_key' } })
    ).json()) as { to: string[]; tags: { name: string; value: string }[] };
    expect(record.to).toEqual(['ada@example.com']);
    expect(record.tags).toEqual([{ name: 'template', value: `compensation_${item.actionId}` }]);
    const settled = h.sandbox.counts().requests;

    // The run ends: a person has the ticket now.
    const state = await h.ctx.store.readState(runId);
    expect(state?.status).toBe('failed');
    expect(state?.reason).toMatch(/^compensated: /);
    expect(c.body.run).toMatchObject({ status: 'failed' });

    // Nothing further: a later click finds it confirmed; not_sent on the original is refused.
    expect((await call(h.url, 'POST', path, { finding: 'not_sent', evidence: {}, operator: 'olga' })).status).toBe(409);
    expect((await call<CompBody>(h.url, 'POST', path, body)).body.compensationState).toBe('confirmed');
    expect(h.sandbox.counts().requests).toBe(settled);
  });

  it('compensate: a compensation whose answer is lost is never resent; a person settles it and the run ends', async () => {
    const { runId, item } = await parkedEmail();
    h.sandbox.setFaults([
      { kind: 'lost_response_after_commit', resource: 'emails', count: 1 },
      { kind: 'no_lookup', resource: 'emails' },
    ]);
    const path = `/v1/reconciliations/${item.actionId}`;
    const body = { finding: 'compensate', evidence: { note: 'wrong template' }, operator: 'olga' };
    const first = await call<CompBody>(h.url, 'POST', path, body);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({
      compensationState: 'needs_human',
      run: { status: 'needs_human', ended: false },
    });
    const compId = first.body.compensation;
    const comp = (await ledger.get(runId, compId))!;
    expect(emails().byKey[comp.idempotencyKey]).toBe(1);
    const posts = () => h.sandbox.counts().requests;
    const afterFirst = posts();

    // A repeat finds it with a person: no second email.
    const again = await call<CompBody>(h.url, 'POST', path, body);
    expect(again.body).toMatchObject({ compensation: compId, compensationState: 'needs_human' });
    expect(posts()).toBe(afterFirst);

    // It is in the human queue like any action; compensating a compensation is refused.
    const list = await call<{ reconciliations: Item[] }>(h.url, 'GET', '/v1/reconciliations');
    expect(list.body.reconciliations.find((x) => x.actionId === compId)).toMatchObject({
      compensates: item.actionId,
      state: 'needs_human',
    });
    expect((await call(h.url, 'POST', `/v1/reconciliations/${compId}`, body)).status).toBe(409);

    const settled = await call(h.url, 'POST', `/v1/reconciliations/${compId}`, {
      finding: 'confirmed',
      receipt: 'em_seen_in_provider',
      evidence: { seenIn: 'provider dashboard' },
      operator: 'olga',
    });
    expect(settled.status).toBe(200);
    expect(settled.body).toMatchObject({ state: 'confirmed', resumed: false, run: { status: 'failed', ended: true } });
    expect((await h.ctx.store.readState(runId))?.reason).toMatch(/^compensated: /);
    expect(posts()).toBe(afterFirst);
    expect(emails().byKey[comp.idempotencyKey]).toBe(1);
    const history = await ledger.history(runId, compId);
    expect(history.map((x) => x.to)).toEqual([
      'planned',
      'authorized',
      'dispatched',
      'outcome_unknown',
      'needs_human',
      'confirmed',
    ]);
  });
});
