/** The human reconciliation queue: an email whose response was lost by a service with no lookup. */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Ledger, type ActionRecord, type HistoryEntry } from '../../src/ledger/ledger.js';
import type { Harness } from '../support/harness.js';
import { call, email, final, operatorHarness, startScripted, turn } from './support.js';

type Item = ActionRecord & { history: HistoryEntry[] };

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
  expect(item?.history.map((x) => x.to)).toEqual(['planned', 'authorized', 'dispatched', 'outcome_unknown', 'needs_human']);
  return { runId, item: item! };
}

const emails = () => h.sandbox.counts().byResource.emails!;

describe('reconciliation queue', () => {
  it('not_sent: the resumed step dispatches once more with the same key', async () => {
    const { runId, item } = await parkedEmail();
    expect(emails().byKey[item.idempotencyKey]).toBe(1);
    const res = await call(h.url, 'POST', `/v1/reconciliations/${item.actionId}`, { finding: 'not_sent', evidence: { note: 'provider says nothing left' }, operator: 'olga' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ state: 'safe_retry', resumed: true });
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('completed');
    const rec = await ledger.get(runId, item.actionId);
    expect(rec?.state).toBe('confirmed');
    expect(rec?.attempts).toBe(2);
    const history = await ledger.history(runId, item.actionId);
    expect(history.map((x) => x.to).slice(-3)).toEqual(['safe_retry', 'dispatched', 'confirmed']);
    expect(history.find((x) => x.to === 'safe_retry')?.by).toBe('olga');
    // One more request, with the same key (the sandbox replays it: still one record).
    expect(Object.keys(emails().byKey)).toEqual([item.idempotencyKey]);
    expect(emails().records).toBe(1);
    const again = await call(h.url, 'POST', `/v1/reconciliations/${item.actionId}`, { finding: 'not_sent', evidence: {}, operator: 'olga' });
    expect(again.status).toBe(409);
  });

  it('confirmed: records the receipt, and the resumed step never resends', async () => {
    const { runId, item } = await parkedEmail();
    const requests = h.sandbox.counts().requests;
    const res = await call(h.url, 'POST', `/v1/reconciliations/${item.actionId}`, { finding: 'confirmed', receipt: 'em_manual_1', evidence: { seenIn: 'provider dashboard' }, operator: 'olga' });
    expect(res.status).toBe(200);
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('completed');
    expect(h.sandbox.counts().requests).toBe(requests);
    const rec = await ledger.get(runId, item.actionId);
    expect(rec).toMatchObject({ state: 'confirmed', receipt: 'em_manual_1', attempts: 1 });
    const list = await call<{ reconciliations: Item[] }>(h.url, 'GET', '/v1/reconciliations');
    expect(list.body.reconciliations.map((x) => x.actionId)).not.toContain(item.actionId);
  });

  it('a confirmed finding without a receipt is refused', async () => {
    const res = await call(h.url, 'POST', '/v1/reconciliations/a_x', { finding: 'confirmed', evidence: {}, operator: 'olga' });
    expect(res.status).toBe(400);
  });

  it('compensate: a new linked action is planned and the history is kept', async () => {
    const { runId, item } = await parkedEmail();
    const res = await call<{ compensation: string; state: string }>(h.url, 'POST', `/v1/reconciliations/${item.actionId}`, { finding: 'compensate', evidence: { customerComplained: true }, operator: 'olga' });
    expect(res.status).toBe(200);
    expect(res.body.state).toBe('compensation_required');
    const effects = await ledger.listForRun(runId);
    const original = effects.find((e) => e.actionId === item.actionId)!;
    const comp = effects.find((e) => e.actionId === res.body.compensation)!;
    expect(original.history.map((x) => x.to)).toEqual(['planned', 'authorized', 'dispatched', 'outcome_unknown', 'needs_human', 'compensation_required']);
    expect(comp).toMatchObject({ state: 'planned', compensates: item.actionId, tool: 'compensate_send_email' });
    expect(comp.history[0]?.by).toBe('olga');
    expect((await h.ctx.store.readState(runId))?.status).toBe('needs_human');
    expect(emails().records).toBe(1);
  });
});
