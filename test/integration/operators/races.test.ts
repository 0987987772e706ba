/**
 * Races and liveness: a sweep never takes a live owner's dispatch for abandoned
 * (a resumed step runs as `<runId>.s<step>.r<n>`; a compensation is driven under
 * a lease), a cancel wins over whatever the step would commit, and an approval
 * cannot expire around its park and leave a run waiting for nothing.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Ledger, type ActionRecord, type HistoryEntry } from '../../../src/ledger/ledger.js';
import { Reconciler } from '../../../src/ledger/reconciler.js';
import { actionIdentity } from '../../../src/ledger/identity.js';
import type { WriteTool } from '../../../src/core/tool.js';
import { stopRun } from '../../../src/runs/stop.js';
import { approvalPolicy, expireApprovals } from '../../../src/ledger/approvals.js';
import { createEffectRunner } from '../../../src/ledger/runner.js';
import type { EffectRunner } from '../../../src/worker/effects.js';
import { buildSpec } from '../../../src/producer/intake.js';
import { createHarness, sampleTicket, type Harness, supportTool } from '../../../testkit/harness.js';
import { call, email, final, OPERATOR_TOKEN, operatorHarness, refund, startScripted, turn } from './support.js';
import { until } from '../../../testkit/until.js';

type Item = ActionRecord & { history: HistoryEntry[] };
interface Pending {
  actionId: string;
  runId: string;
  fingerprint: string;
  expiresAt: number;
}

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

async function pendingFor(runId: string): Promise<Pending> {
  await h.waitForStatus(runId, ['waiting_approval']);
  const list = await call<{ approvals: Pending[] }>(h.url, 'GET', '/v1/approvals');
  const p = list.body.approvals.find((a) => a.runId === runId);
  expect(p).toBeDefined();
  return p!;
}

const duplicates = async () => (await h.ctx.metrics.duplicateWrites.get()).values.reduce((s, v) => s + v.value, 0);
/** A sweep that considers every open action, however recent. */
const sweepNow = () =>
  new Reconciler(h.ctx, 'reconciler:races').sweep(Date.now() + h.cfg.RECONCILER_MIN_AGE_MS + 60_000);

describe('owner liveness', () => {
  it('a resumed step (job .r1) whose write dispatch is slow and live is not swept', async () => {
    const runId = await startScripted(h, [turn([refund(10_000)]), final], 'LIVE');
    const p = await pendingFor(runId);
    const dupBefore = await duplicates();
    h.sandbox.setFaults([{ kind: 'slow_commit', resource: 'refunds', ms: 3000 }]);
    const ok = await call(h.url, 'POST', `/v1/approvals/${p.actionId}`, {
      decision: 'approve',
      fingerprint: p.fingerprint,
      approver: 'alice',
    });
    expect(ok.status).toBe(200);
    await until(
      'the refund in flight',
      20_000,
      async () => (await ledger.get(runId, p.actionId))?.state === 'dispatched',
    );
    expect((await h.ctx.store.readState(runId))?.jobId).toBe(`${runId}.s1.r1`);

    const report = await sweepNow();
    expect(report).toMatchObject({ examined: 1, skippedLive: 1 });

    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('completed');
    const history = await ledger.history(runId, p.actionId);
    expect(history.map((x) => x.to)).toEqual(['planned', 'authorized', 'dispatched', 'confirmed']);
    expect(h.sandbox.counts().byResource.refunds.records).toBe(1);
    expect(Object.values(h.sandbox.counts().byResource.refunds.byKey)).toEqual([1]);
    expect(await duplicates()).toBe(dupBefore);
  });

  it('a compensation whose dispatch is slow and live (its lease held) is not swept', async () => {
    h.sandbox.setFaults([
      { kind: 'lost_response_after_commit', resource: 'emails', count: 1 },
      { kind: 'no_lookup', resource: 'emails' },
    ]);
    const runId = await startScripted(h, [turn([email]), final], 'LIVE');
    expect(await h.waitForStatus(runId, ['needs_human', 'completed', 'failed'])).toBe('needs_human');
    const item = (
      await call<{ reconciliations: Item[] }>(h.url, 'GET', '/v1/reconciliations')
    ).body.reconciliations.find((x) => x.runId === runId)!;
    const dupBefore = await duplicates();
    h.sandbox.setFaults([{ kind: 'slow_commit', resource: 'emails', ms: 3000 }]);
    const compensating = call<{ compensation: string; compensationState: string }>(
      h.url,
      'POST',
      `/v1/reconciliations/${item.actionId}`,
      { finding: 'compensate', evidence: {}, operator: 'olga' },
    );
    const comp = await until('the compensation in flight', 20_000, async () =>
      (await ledger.listForRun(runId)).find((e) => e.compensates === item.actionId && e.state === 'dispatched'),
    );

    const report = await sweepNow();
    expect(report).toMatchObject({ examined: 1, skippedLive: 1 });

    const res = await compensating;
    expect(res.body).toMatchObject({ compensation: comp.actionId, compensationState: 'confirmed' });
    expect((await ledger.history(runId, comp.actionId)).map((x) => x.to)).toEqual([
      'planned',
      'authorized',
      'dispatched',
      'confirmed',
    ]);
    expect(h.sandbox.counts().byResource.emails.byKey[comp.idempotencyKey]).toBe(1);
    expect(await duplicates()).toBe(dupBefore);
  });
});

const ticketCall = {
  name: 'create_ticket',
  args: { subject: 'Follow-up', body: 'Broken mug', priority: 'normal', sourceTicketId: 'T' },
};

describe('cancel wins', () => {
  it('a cancel requested while a step runs a write that would park for approval ends the run cancelled, with no pending approval', async () => {
    h.sandbox.setFaults([{ kind: 'slow_commit', resource: 'tickets', ms: 3000 }]);
    const runId = await startScripted(h, [turn([ticketCall, refund(10_000)]), final], 'CWIN');
    await until('the ticket in flight', 20_000, async () =>
      (await ledger.listForRun(runId)).some((e) => e.state === 'dispatched'),
    );
    const res = await call(h.url, 'POST', `/v1/runs/${runId}/cancel`, { operator: 'olga' });
    expect(res.status).toBe(202);
    expect(await h.waitForStatus(runId, ['cancelled', 'waiting_approval', 'completed', 'failed'])).toBe('cancelled');
    const state = await h.ctx.store.readState(runId);
    expect(state).toMatchObject({ status: 'cancelled', reason: 'cancelled_by_operator: requested by operator' });
    const transcript = await h.ctx.store.transcript(runId);
    expect(transcript.at(-1)).toMatchObject({
      kind: 'status',
      step: 1,
      status: 'cancelled',
      reason: 'cancelled_by_operator: requested by operator',
    });
    const approvals = (await call<{ approvals: Pending[] }>(h.url, 'GET', '/v1/approvals')).body.approvals;
    expect(approvals.filter((a) => a.runId === runId)).toEqual([]);
    expect(h.sandbox.counts().byResource.tickets.records).toBe(1);
    expect(h.sandbox.counts().byResource.refunds.records).toBe(0);
  });

  it('a cancel wins over a budget stop the commit would have written', async () => {
    h.sandbox.setFaults([{ kind: 'slow_commit', resource: 'kb', ms: 2000 }]);
    const spec = buildSpec(
      h.ctx,
      {
        tenant: 'acme',
        ticket: sampleTicket(`CWIN-budget-${Date.now()}`),
        budget: { maxSteps: 1 },
        agent: {
          model: 'scripted',
          script: [turn([email, { name: 'search_kb', args: { query: 'broken mug' } }]), final],
        },
      },
      Date.now(),
    );
    await h.ctx.store.create(spec, Date.now());
    const runId = spec.runId;
    await until('the email confirmed (the slow read follows)', 20_000, async () =>
      (await ledger.listForRun(runId)).some((e) => e.state === 'confirmed'),
    );
    expect((await call(h.url, 'POST', `/v1/runs/${runId}/cancel`, { operator: 'olga' })).status).toBe(202);
    expect(await h.waitForStatus(runId, ['cancelled', 'budget_exceeded', 'completed', 'failed'])).toBe('cancelled');
    const statuses = (await h.ctx.store.transcript(runId))
      .filter((e) => e.kind === 'status')
      .map((e) => e.kind === 'status' && e.status);
    expect(statuses).toEqual(['budget_exceeded', 'cancelled']);
  });

  it('a run cancelled while it waits for approval: its approval is withdrawn, and a decision on one left behind is void', async () => {
    const runId = await startScripted(h, [turn([refund(10_000)]), final], 'CWIN');
    const p = await pendingFor(runId);
    expect((await call(h.url, 'POST', `/v1/runs/${runId}/cancel`, { operator: 'olga' })).status).toBe(200);
    const listed = (await call<{ approvals: Pending[] }>(h.url, 'GET', '/v1/approvals')).body.approvals;
    expect(listed.map((a) => a.runId)).not.toContain(runId);
    expect(await h.ctx.redis.zscore(h.ctx.keys.approvals(h.ctx.keys.shardOf(runId)), p.actionId)).toBeNull();
    expect((await ledger.history(runId, p.actionId)).at(-1)).toMatchObject({
      to: 'rejected',
      why: 'cancelled_by_operator: requested by operator',
    });
    const late = await call(h.url, 'POST', `/v1/approvals/${p.actionId}`, {
      decision: 'approve',
      fingerprint: p.fingerprint,
      approver: 'alice',
    });
    expect(late.status).toBe(409);

    // The cancel's process died before withdrawing it: the approval stays listed nowhere and authorises nothing.
    const runId2 = await startScripted(h, [turn([refund(10_000)]), final], 'CWIN');
    const p2 = await pendingFor(runId2);
    await stopRun(h.ctx, runId2, {
      expected: ['waiting_approval'],
      status: 'cancelled',
      reason: 'cancelled_by_operator: requested by olga',
      now: Date.now(),
      requestCancel: true,
    });
    expect(
      (await call<{ approvals: Pending[] }>(h.url, 'GET', '/v1/approvals')).body.approvals.map((a) => a.runId),
    ).not.toContain(runId2);
    const void2 = await call(h.url, 'POST', `/v1/approvals/${p2.actionId}`, {
      decision: 'approve',
      fingerprint: p2.fingerprint,
      approver: 'alice',
    });
    expect(void2.status).toBe(409);
    expect(void2.body).toMatchObject({ error: 'run_finished', state: 'rejected', reason: 'run_cancelled' });
    expect((await ledger.get(runId2, p2.actionId))?.state).toBe('rejected');
    expect(await h.ctx.store.readState(runId2)).toMatchObject({ status: 'cancelled' });
    expect(h.sandbox.counts().byResource.refunds.records).toBe(0);
  });

  it("a cancel recorded between the runner's read and its move to dispatched: the move refuses, atomically", async () => {
    const runId = `r_cancelcas${Date.now()}`;
    const args = email.args;
    const id = actionIdentity(runId, supportTool(h.ctx, 'send_email') as WriteTool, args);
    await h.ctx.redis.hset(h.ctx.keys.run(runId).run, 'status', 'running', 'cursor', '1');
    await ledger.plan(runId, 1, 'c1', 'send_email', id, args, 'test');
    await ledger.transition(runId, id.actionId, 'planned', 'authorized', { by: 'test', why: 'policy' });
    // The runner saw no cancel; the cancel lands now, before its compare-and-set.
    await stopRun(h.ctx, runId, {
      expected: ['waiting_approval', 'needs_human'],
      status: 'cancelled',
      reason: 'cancelled_by_operator: requested by olga',
      now: Date.now(),
      requestCancel: true,
    });
    await expect(
      ledger.transition(
        runId,
        id.actionId,
        'authorized',
        'dispatched',
        { by: 'worker', why: 'dispatching' },
        {},
        { countAttempt: true, unlessCancelled: true },
      ),
    ).rejects.toMatchObject({
      code: 'run_cancelled',
      details: { cancelReason: 'cancelled_by_operator: requested by olga' },
    });
    expect(await ledger.get(runId, id.actionId)).toMatchObject({ state: 'authorized', attempts: 0 });
    expect((await ledger.history(runId, id.actionId)).map((x) => x.to)).toEqual(['planned', 'authorized']);
    // An operator's order (a compensation) is not refused by the cancel.
    await ledger.transition(
      runId,
      id.actionId,
      'authorized',
      'dispatched',
      { by: 'operator', why: 'compensation' },
      {},
      { countAttempt: true },
    );
    expect((await ledger.get(runId, id.actionId))?.state).toBe('dispatched');
  });

  it('the runner ends a dispatch refused by the cancel in `rejected` with the cancel as evidence, and sends nothing', async () => {
    const runId = `r_cancelrun${Date.now()}`;
    await h.ctx.redis.hset(
      h.ctx.keys.run(runId).run,
      'status',
      'running',
      'cursor',
      '1',
      'cancelRequested',
      '1',
      'cancelReason',
      'cancelled_by_operator: requested by olga',
    );
    const runner = createEffectRunner(h.ctx);
    const ctx = {
      runId,
      step: 1,
      signal: new AbortController().signal,
      input: { id: 'T', subject: 's', body: 'b', customer: { email: 'ada@example.com', name: 'Ada' } },
    };
    const r = await runner.run({
      tool: supportTool(h.ctx, 'send_email') as WriteTool,
      args: email.args,
      call: { id: 'c1' },
      ctx,
      tenant: 'acme',
    });
    expect(r).toMatchObject({
      kind: 'observed',
      status: 'rejected',
      output: { rejected: true, reason: 'cancelled_by_operator', cancel: 'cancelled_by_operator: requested by olga' },
    });
    const history = await ledger.history(runId, r.actionId);
    expect(history.map((x) => x.to)).toEqual(['planned', 'authorized', 'rejected']);
    expect(history.at(-1)?.evidence).toEqual({ cancel: 'cancelled_by_operator: requested by olga' });
    expect(h.sandbox.counts().byResource.emails.records).toBe(0);
    expect(h.sandbox.counts().requests).toBe(0);
  });
});

describe('approval expiry cannot race the park', () => {
  const ledgerAt = (now: number) => new Ledger(h.ctx.redis, h.ctx.keys, () => now);

  it('expires while the run is parked, the sweep dying after rejecting it: the next sweep still stops the run', async () => {
    const runId = await startScripted(h, [turn([refund(9_000)]), final], 'EXP');
    const p = await pendingFor(runId);
    // The sweep's first change (the action rejected as expired), then the sweeper dies.
    await ledgerAt(p.expiresAt + 1).decideApproval(
      runId,
      p.actionId,
      'reject',
      '',
      'approval_expiry',
      'approval_expired',
    );
    expect(await expireApprovals(h.ctx, p.expiresAt + 1)).toContain(p.actionId);
    expect(await h.ctx.store.readState(runId)).toMatchObject({ status: 'failed', reason: 'approval_expired' });
    expect(await h.ctx.redis.zscore(h.ctx.keys.approvals(h.ctx.keys.shardOf(runId)), p.actionId)).toBeNull();
  });

  it('an operator deciding past the expiry dies before stopping the run: the sweep stops it', async () => {
    const runId = await startScripted(h, [turn([refund(9_500)]), final], 'EXP');
    const p = await pendingFor(runId);
    const r = await ledgerAt(p.expiresAt + 1).decideApproval(
      runId,
      p.actionId,
      'approve',
      p.fingerprint,
      'alice',
      'approved by an operator',
    );
    expect(r.outcome).toBe('expired');
    expect(await expireApprovals(h.ctx, p.expiresAt + 1)).toContain(p.actionId);
    expect(await h.ctx.store.readState(runId)).toMatchObject({ status: 'failed', reason: 'approval_expired' });
    expect(h.sandbox.counts().byResource.refunds.records).toBe(0);
  });

  it("an operator's decision whose resume was lost (the API died after the claim): the sweep resumes the run", async () => {
    const runId = await startScripted(h, [turn([refund(9_900)]), final], 'EXP');
    const p = await pendingFor(runId);
    const r = await ledger.decideApproval(
      runId,
      p.actionId,
      'approve',
      p.fingerprint,
      'alice',
      'approved by an operator',
    );
    expect(r.outcome).toBe('decided');
    expect(await h.ctx.store.readState(runId)).toMatchObject({ status: 'waiting_approval' });
    await expireApprovals(h.ctx, Date.now() + h.cfg.RECONCILER_MIN_AGE_MS + 1);
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'], 15_000)).toBe('completed');
    expect(h.sandbox.counts().byResource.refunds.records).toBe(1);
    expect(await h.ctx.redis.zscore(h.ctx.keys.approvals(h.ctx.keys.shardOf(runId)), p.actionId)).toBeNull();
  });
});

describe('approval expiry around the park (a sweep between the runner and the commit)', () => {
  let h2: Harness & { url: string };
  let between: (r: { actionId: string; runId: string }) => Promise<void> = async () => {};
  beforeAll(async () => {
    const base = await createHarness('racespark', {
      OPERATOR_TOKEN,
      APPROVAL_RULES: JSON.stringify([{ tool: 'refund', minAmountCents: 5000 }]),
    });
    const real = createEffectRunner(base.ctx, { approvals: approvalPolicy(base.cfg.APPROVAL_RULES) });
    const effects: EffectRunner = {
      async run(input) {
        const r = await real.run(input);
        if (r.kind === 'park' && r.status === 'waiting_approval')
          await between({ actionId: r.actionId, runId: input.ctx.runId });
        return r;
      },
    };
    await base.startWorker({ effects });
    h2 = Object.assign(base, { url: (await base.startApi()).url });
  });
  afterAll(async () => {
    await h2.close();
  });

  it('a sweep while the step is about to park finds nothing to expire; the park records the approval, a later sweep stops the run', async () => {
    let sweptBetween: string[] | undefined;
    between = async () => {
      sweptBetween = await expireApprovals(h2.ctx, Date.now() + 10 * h2.cfg.APPROVAL_TTL_MS);
    };
    const runId = await startScripted(h2, [turn([refund(10_000)]), final], 'PARK');
    expect(await h2.waitForStatus(runId, ['waiting_approval', 'failed', 'completed'])).toBe('waiting_approval');
    expect(sweptBetween).toEqual([]);
    const p = (await call<{ approvals: Pending[] }>(h2.url, 'GET', '/v1/approvals')).body.approvals.find(
      (a) => a.runId === runId,
    );
    expect(p).toBeDefined();
    expect(await expireApprovals(h2.ctx, p!.expiresAt + 1)).toEqual([p!.actionId]);
    expect(await h2.ctx.store.readState(runId)).toMatchObject({ status: 'failed', reason: 'approval_expired' });
  });

  it('an approval already expired when the park lands (requested by an earlier delivery, swept since) ends the run approval_expired', async () => {
    between = async ({ runId, actionId }) => {
      // As an earlier delivery of this step would have left it: requested, long past its expiry, then swept.
      const past = Date.now() - 1000;
      await h2.ctx.redis.hset(h2.ctx.keys.action(runId, actionId), 'approvalExpiresAt', String(past));
      await h2.ctx.redis.zadd(h2.ctx.keys.approvals(h2.ctx.keys.shardOf(runId)), past, actionId);
      expect(await expireApprovals(h2.ctx, Date.now())).toEqual([actionId]);
    };
    const runId = await startScripted(h2, [turn([refund(10_000)]), final], 'PARK');
    expect(await h2.waitForStatus(runId, ['waiting_approval', 'failed', 'completed'])).toBe('failed');
    expect(await h2.ctx.store.readState(runId)).toMatchObject({ status: 'failed', reason: 'approval_expired' });
    expect((await h2.ctx.store.transcript(runId)).at(-1)).toMatchObject({
      kind: 'status',
      status: 'failed',
      reason: 'approval_expired',
    });
    expect(h2.sandbox.counts().byResource.refunds.records).toBe(0);
  });

  it('an approval requested by an earlier delivery and past its expiry, not yet swept, ends the run at the park', async () => {
    between = async ({ runId, actionId }) => {
      const past = Date.now() - 1000;
      await h2.ctx.redis.hset(h2.ctx.keys.action(runId, actionId), 'approvalExpiresAt', String(past));
      await h2.ctx.redis.zadd(h2.ctx.keys.approvals(h2.ctx.keys.shardOf(runId)), past, actionId);
    };
    const runId = await startScripted(h2, [turn([refund(10_000)]), final], 'PARK');
    expect(await h2.waitForStatus(runId, ['waiting_approval', 'failed', 'completed'])).toBe('failed');
    expect(await h2.ctx.store.readState(runId)).toMatchObject({ status: 'failed', reason: 'approval_expired' });
  });
});
