/**
 * An operator's compensation and its run, to the end: a retry is refused while a compensation is pending (the run
 * would be at work when it lands, and every sweep would try to end it); a run at work all the same (retried by an
 * earlier release, or resumed by a finding on another of its actions) when its compensation is confirmed goes on,
 * and the original leaves the human queue at once, with no wait in the sweep; and a compensation its service refused
 * is said so in the queue and in the compensate answer, and closed by the finding `accept` (the effect stands, the
 * run ends `compensation_refused: ...`).
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Ledger, type ActionRecord, type HistoryEntry } from '../../src/ledger/ledger.js';
import { Reconciler } from '../../src/ledger/reconciler.js';
import { compensationCall } from '../../src/ledger/compensation.js';
import { createEffectRunner } from '../../src/ledger/runner.js';
import { approvalPolicy } from '../../src/ledger/approvals.js';
import { resumeParked } from '../../src/runs/resume.js';
import { ResendClient } from '../../src/agents/support/vendors/resend.js';
import { sendEmailTool } from '../../src/agents/support/tools/sendEmail.js';
import type { WriteTool } from '../../src/core/tool.js';
import type { FleetWorker } from '../../src/worker/fleetWorker.js';
import { createHarness, type Harness } from '../../testkit/harness.js';
import { agentctl, call, email, final, OPERATOR_TOKEN, startScripted, turn } from './operators/support.js';

type Item = ActionRecord & { history: HistoryEntry[]; compensationRefused?: boolean; compensationState?: string };

let h: Harness;
let url: string;
let worker: FleetWorker;
let ledger: Ledger;
beforeAll(async () => {
  h = await createHarness('complife', {
    OPERATOR_TOKEN,
    RECONCILE_DEADLINE_MS: '500',
    RECONCILE_POLL_MS: '20',
    RETRY_BASE_MS: '5',
    RETRY_MAX_MS: '10',
    RECONCILER_MIN_AGE_MS: '0',
  });
  worker = await h.startWorker({ effects: createEffectRunner(h.ctx, { approvals: approvalPolicy([]) }) });
  ({ url } = await h.startApi());
  ledger = new Ledger(h.ctx.redis, h.ctx.keys);
});
afterAll(async () => {
  await h.close();
});
beforeEach(() => h.sandbox.reset());

const queue = async () =>
  (await call<{ reconciliations: Item[] }>(url, 'GET', '/v1/reconciliations')).body.reconciliations;
const queued = async (actionId: string) => (await queue()).find((x) => x.actionId === actionId);
const resolve = (actionId: string, body: unknown) => call(url, 'POST', `/v1/reconciliations/${actionId}`, body);

/** An email whose answer was lost at a service with no lookup: the run parks needs_human with it in the queue. */
async function parkedEmail(): Promise<{ runId: string; item: Item }> {
  h.sandbox.setFaults([
    { kind: 'lost_response_after_commit', resource: 'emails', count: 1 },
    { kind: 'no_lookup', resource: 'emails' },
  ]);
  const runId = await startScripted(h, [turn([email]), final], 'CLC');
  expect(await h.waitForStatus(runId, ['needs_human', 'completed', 'failed'])).toBe('needs_human');
  const item = (await queue()).find((x) => x.runId === runId);
  expect(item?.state).toBe('needs_human');
  h.sandbox.clearFaults();
  return { runId, item: item! };
}

/** The operator's compensate refused for now (a 429): the original compensation_required and queued, not sent. */
async function pendingCompensation(item: Item): Promise<string> {
  h.sandbox.setFaults([{ kind: 'rate_limit', resource: 'emails', retryAfterS: 0 }]);
  const res = await resolve(item.actionId, { finding: 'compensate', evidence: { note: 'wrong template' } });
  expect(res.status).toBe(202);
  expect(res.body).toMatchObject({ compensationState: 'safe_retry', compensationSent: false });
  h.sandbox.clearFaults();
  return res.body.compensation as string;
}

/** The operator's compensation of `item` planned and linked, as Compensations.compensate does, and not driven. */
async function linkedCompensation(runId: string, item: Item): Promise<ActionRecord> {
  const spec = (await h.ctx.store.readSpec(runId))!;
  const { tool, args } = compensationCall(item, spec, h.ctx.agents.get(spec.agent));
  const comp = await ledger.planCompensation(item, tool.name, args, 'olga', {});
  await ledger.transition(
    runId,
    item.actionId,
    'needs_human',
    'compensation_required',
    { by: 'olga', why: 'operator finding: compensate' },
    { compensatedBy: comp.actionId },
  );
  return comp;
}

/**
 * A compensation its service refused outright (Resend's 403 for a key it does not know), recorded by the effect
 * runner as it records any refusal: confirmed, outcome rejected_by_service, output {rejected: true, ...}.
 */
async function refusedCompensation(runId: string, item: Item): Promise<ActionRecord> {
  const spec = (await h.ctx.store.readSpec(runId))!;
  const comp = await linkedCompensation(runId, item);
  await ledger.transition(runId, comp.actionId, 'planned', 'authorized', { by: 'olga', why: 'compensation' });
  const refusing = sendEmailTool(
    new ResendClient({ baseUrl: h.sandbox.url, apiKey: 'sk_live_wrong', from: 'S <s@example.com>', timeoutMs: 2000 }),
  ) as WriteTool;
  const ctx = { runId, step: comp.step, signal: new AbortController().signal, input: spec.input };
  await createEffectRunner(h.ctx).settle(comp.actionId, refusing, comp.args, ctx, spec.tenant);
  const settled = (await ledger.get(runId, comp.actionId))!;
  expect(settled).toMatchObject({ state: 'confirmed', outcome: 'rejected_by_service', output: { rejected: true } });
  return settled;
}

describe('a compensation and its run', () => {
  it('a retry while the compensation is pending is refused, naming the action; accept is refused too', async () => {
    const { runId, item } = await parkedEmail();
    const compId = await pendingCompensation(item);

    const retry = await call(url, 'POST', `/v1/runs/${runId}/retry`, {});
    expect(retry.status).toBe(409);
    expect(retry.body).toMatchObject({ error: 'action_waiting', actionId: item.actionId, compensationPending: true });
    expect(retry.body.message).toMatch(/compensation of this action is pending/);
    expect(await h.ctx.store.readState(runId)).toMatchObject({ status: 'needs_human' });

    // Not refused by its service, only not sent yet: nothing to accept.
    const acc = await resolve(item.actionId, { finding: 'accept', evidence: {} });
    expect(acc.status).toBe(409);
    expect(acc.body).toMatchObject({
      error: 'compensation_not_refused',
      compensation: compId,
      compensationState: 'safe_retry',
    });
    expect(await queued(item.actionId)).toMatchObject({ compensationRefused: false, compensationState: 'safe_retry' });

    // The sweep sends it and ends the run as ever.
    await new Reconciler(h.ctx, 'reconciler:complife').sweep();
    expect((await h.ctx.store.readState(runId))?.reason).toMatch(/^compensated: /);
    expect(await queued(item.actionId)).toBeUndefined();

    // Compensated, the run does not go on: its step would find the action and park with nothing queued.
    const after = await call(url, 'POST', `/v1/runs/${runId}/retry`, {});
    expect(after.status).toBe(409);
    expect(after.body).toMatchObject({ error: 'run_compensated', actionId: item.actionId });
    expect(await h.ctx.store.readState(runId)).toMatchObject({ status: 'failed' });
  });

  it('refused by its service: the queue and the compensate answer say so, and accept ends the run', async () => {
    const { runId, item } = await parkedEmail();
    const comp = await refusedCompensation(runId, item);

    expect(await queued(item.actionId)).toMatchObject({
      state: 'compensation_required',
      compensatedBy: comp.actionId,
      compensationState: 'confirmed',
      compensationRefused: true,
    });
    const again = await resolve(item.actionId, { finding: 'compensate', evidence: {} });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({
      state: 'compensation_required',
      compensationRefused: true,
      run: { status: 'needs_human' },
    });
    // The sweep leaves it to a person.
    expect((await new Reconciler(h.ctx, 'reconciler:complife').sweep()).compensations.driven).toBe(0);

    // Bodies validated like the other findings: the field named, nothing written.
    const history = (await ledger.history(runId, item.actionId)).length;
    const withReceipt = await resolve(item.actionId, { finding: 'accept', receipt: 'em_1', evidence: {} });
    expect(withReceipt.status).toBe(400);
    expect(withReceipt.body).toMatchObject({ error: 'invalid_request', fields: [{ path: 'receipt' }] });
    const misspelt = await resolve(item.actionId, { finding: 'acept', evidence: {} });
    expect(misspelt.status).toBe(400);
    expect(misspelt.body).toMatchObject({ error: 'invalid_request', fields: [{ path: 'finding' }] });
    expect((await ledger.history(runId, item.actionId)).length).toBe(history);
    expect(await queued(item.actionId)).toBeDefined();

    // An action not compensated is not accepted.
    const other = await parkedEmail();
    const notComp = await resolve(other.item.actionId, { finding: 'accept', evidence: {} });
    expect(notComp.status).toBe(409);
    expect(notComp.body).toMatchObject({ error: 'compensation_not_refused', state: 'needs_human' });

    // Through agentctl, as an operator would.
    const ctl = await agentctl(url)(
      'resolve',
      item.actionId,
      'accept',
      '--evidence',
      '{"note":"customer informed by phone"}',
    );
    expect(ctl.code).toBe(0);
    const body = JSON.parse(ctl.out) as Record<string, unknown>;
    const operator = body.operator as string;
    const reason = `compensation_refused: action ${item.actionId}'s compensation ${comp.actionId} was refused by its service; the effect stands (${operator})`;
    expect(body).toMatchObject({
      state: 'compensation_required',
      compensation: comp.actionId,
      compensationRefused: true,
      run: { status: 'failed', ended: true, reason },
    });
    expect(await h.ctx.store.readState(runId)).toMatchObject({ status: 'failed', reason });
    expect(await queued(item.actionId)).toBeUndefined();
    const rec = (await ledger.get(runId, item.actionId))!;
    expect(rec.state).toBe('compensation_required');
    expect((await ledger.history(runId, item.actionId)).at(-1)).toMatchObject({
      from: 'compensation_required',
      to: 'compensation_required',
      by: operator,
      why: 'operator finding: accept',
      evidence: { finding: 'accept', evidence: { note: 'customer informed by phone' }, compensation: comp.actionId },
    });
    const journal = await h.ctx.store.transcript(runId);
    expect(journal.at(-1)).toMatchObject({
      kind: 'operator',
      action: 'resolve',
      by: operator,
      actionId: item.actionId,
      detail: 'accept',
    });

    // Its effect accepted, the run does not go on either.
    const retried = await call(url, 'POST', `/v1/runs/${runId}/retry`, {});
    expect(retried.status).toBe(409);
    expect(retried.body).toMatchObject({ error: 'run_compensated', actionId: item.actionId });

    // Once: a repeat finds nothing queued, and writes nothing.
    const repeat = await resolve(item.actionId, { finding: 'accept', evidence: {} });
    expect(repeat.status).toBe(409);
    expect(repeat.body).toMatchObject({ error: 'not_in_human_queue' });
    expect((await ledger.history(runId, item.actionId)).length).toBe(history + 1);
  });

  it('a compensation never sent (rejected) is accepted too, and the reason says it was never sent', async () => {
    const { runId, item } = await parkedEmail();
    const comp = await linkedCompensation(runId, item);
    await ledger.transition(runId, comp.actionId, 'planned', 'rejected', { by: 'olga', why: 'cancelled' });
    expect(await queued(item.actionId)).toMatchObject({ compensationRefused: true, compensationState: 'rejected' });

    const res = await resolve(item.actionId, { finding: 'accept', evidence: {} });
    expect(res.status).toBe(200);
    const reason = (await h.ctx.store.readState(runId))?.reason;
    expect(reason).toMatch(
      new RegExp(
        `^compensation_refused: action ${item.actionId}'s compensation ${comp.actionId} was never sent; the effect stands \\(`,
      ),
    );
    expect(await queued(item.actionId)).toBeUndefined();
  });

  // Last: it stops the worker, so that the resumed run stays at work.
  it('confirmed while its run is at work: the run goes on, the original leaves the queue, the sweep does not wait', async () => {
    const { runId, item } = await parkedEmail();
    const compId = await pendingCompensation(item);
    // What an earlier release's retry did, and what a finding on another action of the run does: it is at work.
    await worker.stop();
    expect(await resumeParked(h.ctx, runId, 'needs_human')).toMatchObject({ resumed: true });

    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    const reconciler = new Reconciler({ ...h.ctx, log: pino(sink) }, 'reconciler:complife');
    const started = Date.now();
    const report = await reconciler.sweep();
    // Not END_SETTLE_MS (3 s) of polling a run that is not parked.
    expect(Date.now() - started).toBeLessThan(2500);

    const comp = (await ledger.get(runId, compId))!;
    expect(comp.state).toBe('confirmed');
    expect(h.sandbox.counts().byResource.emails.byKey[comp.idempotencyKey]).toBe(1);
    expect((await h.ctx.store.readState(runId))?.status).toBe('running');
    expect(await queued(item.actionId)).toBeUndefined();
    expect(report.compensations).toMatchObject({ driven: 1, ended: 0, atWork: 1, unsettled: 0 });
    const logged = lines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.code === 'compensated_run_at_work');
    expect(logged).toEqual([
      expect.objectContaining({ runId, actionId: compId, original: item.actionId, status: 'running', driver: 'sweep' }),
    ]);
    expect(JSON.stringify(logged)).not.toMatch(/ada@example\.com/);
    expect((await h.ctx.metrics.compensatedRunsAtWork.get()).values).toEqual([
      expect.objectContaining({ labels: { driver: 'sweep' }, value: 1 }),
    ]);

    // Nothing more: the next sweep drives nothing and sends nothing.
    const sent = h.sandbox.counts().requests;
    expect((await reconciler.sweep()).compensations.driven).toBe(0);
    expect(h.sandbox.counts().requests).toBe(sent);
  });
});
