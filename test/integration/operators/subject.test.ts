/**
 * One run at work per subject, through the real HTTP API, a worker and the sandbox: every way back to work
 * (retry, an approval's resume, a human-queue resume, a version continue) refuses a run that a later run of
 * its subject superseded, naming the later run; and a decision on a run that is cancelled meanwhile is void,
 * its action ending `rejected` with the cancel as evidence.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildSpec } from '../../../src/producer/intake.js';
import { Ledger, type ActionRecord, type HistoryEntry } from '../../../src/ledger/ledger.js';
import type { Script } from '../../../src/models/scriptedTurns.js';
import { producerAuth, sampleTicket, type Harness } from '../../../testkit/harness.js';
import { until } from '../../../testkit/until.js';
import { call, email, final, operatorHarness, refund, turn } from './support.js';

type Item = ActionRecord & { history: HistoryEntry[] };

let h: Harness & { url: string };
let ledger: Ledger;
beforeAll(async () => {
  h = await operatorHarness('subject', {
    RECONCILE_DEADLINE_MS: '200',
    RECONCILE_POLL_MS: '20',
    FOLLOW_UP_WAIT_MS: '50',
    RUN_RETENTION_MS: '3600000',
  });
  ledger = new Ledger(h.ctx.redis, h.ctx.keys);
});
afterAll(async () => {
  await h.close();
});
beforeEach(() => h.sandbox.reset());

let seq = 0;
const ticketId = () => `SUBJ-${++seq}-${Date.now()}`;

/** POST /v1/runs with an Idempotency-Key: one run per event, a later event on the ticket is a follow-up. */
async function postRun(
  id: string,
  event: string,
  script: Script,
  budget?: { maxSteps?: number; maxWallMs?: number },
): Promise<string> {
  const res = await fetch(`${h.url}/v1/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': `${id}-${event}`, ...producerAuth },
    body: JSON.stringify({ tenant: 'acme', ticket: sampleTicket(id), agent: { model: 'scripted', script }, budget }),
  });
  const body = (await res.json()) as { runId: string };
  expect(res.status).toBe(201);
  return body.runId;
}

/** A follow-up that stays at work: every attempt of its first model call fails (503), so it waits out an outage. */
const AT_WORK: Script = [
  { toolCalls: [email], transientFailures: 20, usage: { promptTokens: 1, completionTokens: 1 } },
];

/** The follow-up on the same ticket, linked to `previous` and still at work (queued). */
async function followUpAtWork(id: string, previous: string): Promise<string> {
  const later = await postRun(id, 'evt-2', AT_WORK);
  expect((await h.ctx.redis.hget(h.ctx.keys.run(later).run, 'previousRunId')) ?? '').toBe(previous);
  return later;
}

const status = async (runId: string) => (await h.ctx.store.readState(runId))?.status;
const cancel = (runId: string) => call(h.url, 'POST', `/v1/runs/${runId}/cancel`, {});
/** Times a follow-up's step found a run before it at work and waited (agent_follow_up_waits_total). */
const followUpWaits = async () => (await h.ctx.metrics.followUpWaits.get()).values[0]?.value ?? 0;

async function pendingApproval(runId: string): Promise<{ actionId: string; fingerprint: string }> {
  await h.waitForStatus(runId, ['waiting_approval']);
  const list = await call<{ approvals: { actionId: string; runId: string; fingerprint: string }[] }>(
    h.url,
    'GET',
    '/v1/approvals',
  );
  const p = list.body.approvals.find((a) => a.runId === runId);
  expect(p).toBeDefined();
  return p!;
}

describe('one run at work per subject', () => {
  it('retry: a run superseded by a follow-up at work is refused, 409 naming the later run; nothing is written', async () => {
    const id = ticketId();
    const first = await postRun(id, 'evt-1', [turn([]), turn([email]), final], { maxSteps: 1 });
    expect(await h.waitForStatus(first, ['budget_exceeded', 'completed', 'failed'])).toBe('budget_exceeded');
    const later = await followUpAtWork(id, first);
    expect(await status(later)).toBe('queued');
    const journal = (await h.ctx.store.transcript(first)).length;

    const res = await call(h.url, 'POST', `/v1/runs/${first}/retry`, { steps: 5 });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ error: 'run_superseded', runId: first, laterRunId: later });
    expect(await status(first)).toBe('budget_exceeded');
    expect((await h.ctx.store.transcript(first)).length).toBe(journal);
    // The refused retry made no job: nothing of the run can send the email.
    await h.untilNoJob(first);
    expect(h.sandbox.counts().byResource.emails.records).toBe(0);
    await cancel(later);
  });

  it('approval: approving a superseded run is void (409 naming the later run), nothing sent, the run ends', async () => {
    const id = ticketId();
    const first = await postRun(id, 'evt-1', [turn([refund(6000)]), final]);
    const p = await pendingApproval(first);
    const later = await followUpAtWork(id, first);

    const res = await call(h.url, 'POST', `/v1/approvals/${p.actionId}`, {
      decision: 'approve',
      fingerprint: p.fingerprint,
    });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ error: 'run_superseded', laterRunId: later, state: 'rejected' });
    expect((await ledger.get(first, p.actionId))?.state).toBe('rejected');
    expect(await h.ctx.store.readState(first)).toMatchObject({ status: 'failed', reason: `superseded: ${later}` });
    await h.untilNoJob(first);
    expect(h.sandbox.counts().byResource.refunds.records).toBe(0);
    await cancel(later);
  });

  it('approval on a run cancelled between the decision and the resume: 409 run_finished, the action rejected with the cancel as evidence', async () => {
    const id = ticketId();
    const runId = await postRun(id, 'evt-1', [turn([refund(7000)]), final]);
    const p = await pendingApproval(runId);
    // The cancel lands after the decision is recorded and before the run is resumed.
    const store = h.ctx.store;
    const resume = store.resume.bind(store);
    store.resume = async (...args: Parameters<typeof store.resume>) => {
      expect((await cancel(runId)).status).toBe(200);
      return resume(...args);
    };
    let res;
    try {
      res = await call(h.url, 'POST', `/v1/approvals/${p.actionId}`, {
        decision: 'approve',
        fingerprint: p.fingerprint,
      });
    } finally {
      store.resume = resume;
    }
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ error: 'run_finished', runStatus: 'cancelled', state: 'rejected' });
    expect(await status(runId)).toBe('cancelled');
    const rec = (await ledger.listForRun(runId)).find((a) => a.actionId === p.actionId)!;
    expect(rec.state).toBe('rejected');
    const last = rec.history.at(-1)!;
    expect(last).toMatchObject({ from: 'authorized', to: 'rejected' });
    expect(JSON.stringify(last.evidence)).toContain('cancelled_by_operator');
    expect(h.sandbox.counts().byResource.refunds.records).toBe(0);
  });

  it('human queue: resolving an action of a superseded run does not resume it; the run ends naming the later run', async () => {
    h.sandbox.setFaults([
      { kind: 'lost_response_after_commit', resource: 'emails', count: 1 },
      { kind: 'no_lookup', resource: 'emails' },
    ]);
    const id = ticketId();
    const first = await postRun(id, 'evt-1', [turn([email]), final]);
    expect(await h.waitForStatus(first, ['needs_human', 'completed', 'failed'])).toBe('needs_human');
    h.sandbox.clearFaults();
    const later = await followUpAtWork(id, first);
    const list = await call<{ reconciliations: Item[] }>(h.url, 'GET', '/v1/reconciliations');
    const item = list.body.reconciliations.find((x) => x.runId === first)!;

    const res = await call(h.url, 'POST', `/v1/reconciliations/${item.actionId}`, {
      finding: 'not_sent',
      evidence: { note: 'provider says nothing left' },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ resumed: false, laterRunId: later, runStatus: 'failed', state: 'safe_retry' });
    expect(await h.ctx.store.readState(first)).toMatchObject({ status: 'failed', reason: `superseded: ${later}` });
    await h.untilNoJob(first);
    // The superseded run did not send its email again.
    expect(h.sandbox.counts().byResource.emails.byKey[item.idempotencyKey]).toBe(1);
    await cancel(later);
  });

  it('create: a follow-up waits for an older run still at work behind a previous run that stopped while waiting', async () => {
    const id = ticketId();
    const first = await postRun(id, 'evt-1', AT_WORK);
    // The second waits for the first until its own wall clock runs out.
    const second = await postRun(id, 'evt-2', [final], { maxWallMs: 1000 });
    expect(await h.waitForStatus(second, ['budget_exceeded', 'completed'], 10_000)).toBe('budget_exceeded');
    expect(await status(first)).toBe('queued');
    const third = await postRun(id, 'evt-3', [final]);
    expect((await h.ctx.redis.hget(h.ctx.keys.run(third).run, 'previousRunId')) ?? '').toBe(second);
    // The third's step has looked at the runs before it twice since it was made, and waited each time.
    const waited = await followUpWaits();
    await until('the third run waiting twice', 10_000, async () => (await followUpWaits()) >= waited + 2);
    // The first is still at work: the third has not started.
    expect(await status(third)).toBe('queued');
    expect(await h.ctx.redis.hget(h.ctx.keys.run(third).run, 'followUpContext')).toBeNull();
    await cancel(first);
    expect(await h.waitForStatus(third, ['completed', 'failed', 'budget_exceeded'])).toBe('completed');
  });

  it('version continue: a superseded run parked for a version change is refused, 409 naming the later run', async () => {
    const id = ticketId();
    const now = Date.now();
    const spec = buildSpec(
      h.ctx,
      { tenant: 'acme', ticket: sampleTicket(id), agent: { model: 'scripted', script: [final] } },
      now,
    );
    // Pinned to a version no worker serves: the step parks it in the version queue.
    expect(await h.ctx.store.create({ ...spec, agentVersion: 'support@0' }, now)).toBe(true);
    expect(await h.waitForStatus(spec.runId, ['needs_human', 'completed'])).toBe('needs_human');
    const later = await followUpAtWork(id, spec.runId);

    const res = await call(h.url, 'POST', `/v1/operators/version-mismatches/${spec.runId}/continue`, {});
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ error: 'run_superseded', runId: spec.runId, laterRunId: later });
    expect(await status(spec.runId)).toBe('needs_human');
    await cancel(later);
  });
});
