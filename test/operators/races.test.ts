/**
 * Races and liveness: a sweep never takes a live owner's dispatch for abandoned
 * (a resumed step runs as `<runId>.s<step>.r<n>`; a compensation is driven under
 * a lease), a cancel wins over whatever the step would commit, and an approval
 * cannot expire around its park and leave a run waiting for nothing.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Ledger, type ActionRecord, type HistoryEntry } from '../../src/ledger/ledger.js';
import { Reconciler } from '../../src/ledger/reconciler.js';
import type { Harness } from '../support/harness.js';
import { call, email, final, operatorHarness, refund, startScripted, turn } from './support.js';

type Item = ActionRecord & { history: HistoryEntry[] };
interface Pending { actionId: string; runId: string; fingerprint: string; expiresAt: number }

let h: Harness & { url: string };
let ledger: Ledger;
beforeAll(async () => {
  h = await operatorHarness('races', { RECONCILE_DEADLINE_MS: '2000', RECONCILE_POLL_MS: '20' });
  ledger = new Ledger(h.ctx.redis, h.ctx.keys);
});
afterAll(async () => {
  await h.close();
});
beforeEach(() => h.sandbox.reset());

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const v = await probe();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function pendingFor(runId: string): Promise<Pending> {
  await h.waitForStatus(runId, ['waiting_approval']);
  const list = await call<{ approvals: Pending[] }>(h.url, 'GET', '/v1/approvals');
  const p = list.body.approvals.find((a) => a.runId === runId);
  expect(p).toBeDefined();
  return p!;
}

const duplicates = async () => (await h.ctx.metrics.duplicateWrites.get()).values.reduce((s, v) => s + v.value, 0);
/** A sweep that considers every open action, however recent. */
const sweepNow = () => new Reconciler(h.ctx, 'reconciler:races').sweep(Date.now() + h.cfg.RECONCILER_MIN_AGE_MS + 60_000);

describe('owner liveness', () => {
  it('a resumed step (job .r1) whose write dispatch is slow and live is not swept', async () => {
    const runId = await startScripted(h, [turn([refund(10_000)]), final], 'LIVE');
    const p = await pendingFor(runId);
    const dupBefore = await duplicates();
    h.sandbox.setFaults([{ kind: 'slow_commit', resource: 'refunds', ms: 3000 }]);
    const ok = await call(h.url, 'POST', `/v1/approvals/${p.actionId}`, { decision: 'approve', fingerprint: p.fingerprint, approver: 'alice' });
    expect(ok.status).toBe(200);
    await until('the refund in flight', async () => ((await ledger.get(runId, p.actionId))?.state === 'dispatched' ? true : undefined));
    expect((await h.ctx.store.readState(runId))?.jobId).toBe(`${runId}.s1.r1`);

    const report = await sweepNow();
    expect(report).toMatchObject({ examined: 1, skippedLive: 1 });

    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('completed');
    const history = await ledger.history(runId, p.actionId);
    expect(history.map((x) => x.to)).toEqual(['planned', 'authorized', 'dispatched', 'confirmed']);
    expect(h.sandbox.counts().byResource.refunds!.records).toBe(1);
    expect(Object.values(h.sandbox.counts().byResource.refunds!.byKey)).toEqual([1]);
    expect(await duplicates()).toBe(dupBefore);
  });

  it('a compensation whose dispatch is slow and live (its lease held) is not swept', async () => {
    h.sandbox.setFaults([
      { kind: 'lost_response_after_commit', resource: 'emails', count: 1 },
      { kind: 'no_lookup', resource: 'emails' },
    ]);
    const runId = await startScripted(h, [turn([email]), final], 'LIVE');
    expect(await h.waitForStatus(runId, ['needs_human', 'completed', 'failed'])).toBe('needs_human');
    const item = (await call<{ reconciliations: Item[] }>(h.url, 'GET', '/v1/reconciliations')).body.reconciliations.find((x) => x.runId === runId)!;
    const dupBefore = await duplicates();
    h.sandbox.setFaults([{ kind: 'slow_commit', resource: 'emails', ms: 3000 }]);
    const compensating = call<{ compensation: string; compensationState: string }>(h.url, 'POST', `/v1/reconciliations/${item.actionId}`, { finding: 'compensate', evidence: {}, operator: 'olga' });
    const comp = await until('the compensation in flight', async () => (await ledger.listForRun(runId)).find((e) => e.compensates === item.actionId && e.state === 'dispatched'));

    const report = await sweepNow();
    expect(report).toMatchObject({ examined: 1, skippedLive: 1 });

    const res = await compensating;
    expect(res.body).toMatchObject({ compensation: comp.actionId, compensationState: 'confirmed' });
    expect((await ledger.history(runId, comp.actionId)).map((x) => x.to)).toEqual(['planned', 'authorized', 'dispatched', 'confirmed']);
    expect(h.sandbox.counts().byResource.emails!.byKey[comp.idempotencyKey]).toBe(1);
    expect(await duplicates()).toBe(dupBefore);
  });
});
