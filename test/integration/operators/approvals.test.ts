/** Approvals against real Redis, real workers and the real sandbox over HTTP. */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Ledger } from '../../../src/ledger/ledger.js';
import { approvalPolicy, expireApprovals } from '../../../src/ledger/approvals.js';
import { createSupportTools } from '../../../src/agents/support/tools/index.js';
import type { WriteTool } from '../../../src/core/tool.js';

// The policy reads the tool's name and arguments only: the service is never called.
const refundTool = createSupportTools({ baseUrl: 'http://127.0.0.1:9' }).find((t) => t.name === 'refund') as WriteTool;
import type { Harness } from '../../../testkit/harness.js';
import { call, final, operatorHarness, refund, startScripted, turn } from './support.js';

interface Pending {
  actionId: string;
  runId: string;
  tenant: string;
  tool: string;
  args: unknown;
  fingerprint: string;
  expiresAt: number;
}

let h: Harness & { url: string };
let ledger: Ledger;
beforeAll(async () => {
  h = await operatorHarness('approvals');
  ledger = new Ledger(h.ctx.redis, h.ctx.keys);
});
afterAll(async () => {
  await h.close();
});
beforeEach(() => h.sandbox.reset());

async function pendingFor(runId: string): Promise<Pending> {
  await h.waitForStatus(runId, ['waiting_approval']);
  const list = await call<{ approvals: Pending[] }>(h.url, 'GET', '/v1/approvals');
  expect(list.status).toBe(200);
  const p = list.body.approvals.find((a) => a.runId === runId);
  expect(p).toBeDefined();
  return p!;
}

const refundsSent = () => h.sandbox.counts().byResource.refunds.records;

describe('approvals', () => {
  it('the policy matches tool, tenant and amount', () => {
    const p = approvalPolicy([
      { tool: 'refund', minAmountCents: 5000 },
      { tool: 'send_email', tenant: 'acme' },
    ]);
    expect(p.requiresApproval('acme', refundTool, refund(4999).args)).toBe(false);
    expect(p.requiresApproval('acme', refundTool, refund(5000).args)).toBe(true);
    expect(p.requiresApproval('other', { ...refundTool, name: 'send_email' }, {})).toBe(false);
    expect(p.requiresApproval('acme', { ...refundTool, name: 'send_email' }, {})).toBe(true);
  });

  it('lists a pending approval with the exact args; two concurrent approvals authorise once and dispatch once', async () => {
    const runId = await startScripted(h, [turn([refund(10_000)]), final]);
    const p = await pendingFor(runId);
    expect(p).toMatchObject({ tool: 'refund', tenant: 'acme' });
    expect(p.args).toEqual(refund(10_000).args);
    expect(p.expiresAt).toBeGreaterThan(Date.now());
    expect(refundsSent()).toBe(0);

    const body = { decision: 'approve', fingerprint: p.fingerprint };
    const [a, b] = await Promise.all([
      call(h.url, 'POST', `/v1/approvals/${p.actionId}`, { ...body, approver: 'alice' }),
      call(h.url, 'POST', `/v1/approvals/${p.actionId}`, { ...body, approver: 'bob' }),
    ]);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect([a.body.alreadyDecided, b.body.alreadyDecided].sort()).toEqual([false, true]);
    const { alreadyDecided: _x, ...first } = a.body;
    const { alreadyDecided: _y, ...second } = b.body;
    expect(first).toEqual(second);

    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('completed');
    expect(refundsSent()).toBe(1);
    const rec = await ledger.get(runId, p.actionId);
    const history = await ledger.history(runId, p.actionId);
    expect(rec?.state).toBe('confirmed');
    expect(history.filter((x) => x.to === 'authorized')).toHaveLength(1);
    expect(history.find((x) => x.to === 'authorized')?.by).toBe(first.approver);
    expect(
      (await call<{ approvals: Pending[] }>(h.url, 'GET', '/v1/approvals')).body.approvals.map((x) => x.actionId),
    ).not.toContain(p.actionId);

    // A later decision changes nothing and reports the first one.
    const late = await call(h.url, 'POST', `/v1/approvals/${p.actionId}`, {
      decision: 'reject',
      fingerprint: p.fingerprint,
      approver: 'carol',
    });
    expect(late.status).toBe(200);
    expect(late.body).toMatchObject({ ...first, alreadyDecided: true });
    expect(refundsSent()).toBe(1);
  });

  it('a wrong fingerprint is refused with 409 and changes nothing', async () => {
    const runId = await startScripted(h, [turn([refund(7_500)]), final]);
    const p = await pendingFor(runId);
    const res = await call(h.url, 'POST', `/v1/approvals/${p.actionId}`, {
      decision: 'approve',
      fingerprint: 'f'.repeat(64),
      approver: 'mallory',
    });
    expect(res.status).toBe(409);
    expect(res.body.error).toBe('fingerprint_mismatch');
    expect((await ledger.get(runId, p.actionId))?.state).toBe('planned');
    expect(await ledger.history(runId, p.actionId)).toHaveLength(1);
    expect((await h.ctx.store.readState(runId))?.status).toBe('waiting_approval');
    expect(refundsSent()).toBe(0);
    // Clean up with a rejection: the model sees it and the run completes without a refund.
    const ok = await call(h.url, 'POST', `/v1/approvals/${p.actionId}`, {
      decision: 'reject',
      fingerprint: p.fingerprint,
      approver: 'alice',
    });
    expect(ok.status).toBe(200);
    expect(await h.waitForStatus(runId, ['completed', 'failed'])).toBe('completed');
    const obs = (await h.ctx.store.transcript(runId)).filter((e) => e.kind === 'observation');
    expect(obs.map((e) => e.kind === 'observation' && e.status)).toEqual(['rejected']);
    expect((await ledger.get(runId, p.actionId))?.state).toBe('rejected');
    expect(refundsSent()).toBe(0);
  });

  it('requires the operator token', async () => {
    expect((await call(h.url, 'GET', '/v1/approvals', undefined, '')).status).toBe(401);
    expect(
      (
        await call(
          h.url,
          'POST',
          '/v1/approvals/a_x',
          { decision: 'approve', fingerprint: 'x', approver: 'y' },
          'wrong',
        )
      ).status,
    ).toBe(401);
  });

  it('an expired approval is rejected and stops the run as approval_expired', async () => {
    const runId = await startScripted(h, [turn([refund(9_000)]), final]);
    const p = await pendingFor(runId);
    expect(await expireApprovals(h.ctx, p.expiresAt - 1)).not.toContain(p.actionId);
    const expired = await expireApprovals(h.ctx, p.expiresAt + 1);
    expect(expired).toContain(p.actionId);
    const state = await h.ctx.store.readState(runId);
    expect(state).toMatchObject({ status: 'failed', reason: 'approval_expired' });
    const history = await ledger.history(runId, p.actionId);
    expect(history.at(-1)).toMatchObject({ from: 'planned', to: 'rejected', why: 'approval_expired' });
    const late = await call(h.url, 'POST', `/v1/approvals/${p.actionId}`, {
      decision: 'approve',
      fingerprint: p.fingerprint,
      approver: 'alice',
    });
    expect(late.status).toBe(409);
    expect(late.body.error).toBe('approval_expired');
    expect(refundsSent()).toBe(0);
  });
});
