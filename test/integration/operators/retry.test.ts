/**
 * Retrying a stopped run (POST /v1/runs/:id/retry, agentctl retry): from its last
 * commit, through the ledger (a confirmed effect is not sent again), with a budget
 * extension journalled under the authenticated operator; refusals write nothing.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Compactor } from '../../../src/runs/compactor.js';
import { buildSpec } from '../../../src/producer/intake.js';
import { replayRun } from '../../../src/runs/replay.js';
import { createEffectRunner } from '../../../src/ledger/runner.js';
import { approvalPolicy } from '../../../src/ledger/approvals.js';
import { Ledger } from '../../../src/ledger/ledger.js';
import type { EffectRunner } from '../../../src/worker/effects.js';
import type { Script } from '../../../src/models/scriptedTurns.js';
import { createHarness, sampleTicket, type Harness } from '../../../testkit/harness.js';
import { agentctl, call, final, email, OPERATOR_TOKEN, refund, startScripted, turn } from './support.js';
import { ticketCall } from '../../../testkit/turns.js';
import { readRunEvents } from '../../../testkit/runEvents.js';

const email2 = { name: 'send_email', args: { ...email.args, template: 'follow_up', body: 'Here is the follow-up.' } };

let h: Harness & { url: string };
let ledger: Ledger;
/** While set, the step fails right after the email's effect is confirmed (the ledger has it, the step does not commit). */
let failAfterEmail = false;

beforeAll(async () => {
  const harness = await createHarness('retry', {
    OPERATOR_TOKEN,
    RECONCILE_DEADLINE_MS: '200',
    RECONCILE_POLL_MS: '20',
    RUN_RETENTION_MS: '3600000',
    APPROVAL_RULES: JSON.stringify([{ tool: 'refund', minAmountCents: 5000 }]),
  });
  const real = createEffectRunner(harness.ctx, { approvals: approvalPolicy(harness.cfg.APPROVAL_RULES) });
  const effects: EffectRunner = {
    async run(input) {
      const r = await real.run(input);
      if (failAfterEmail && input.call.name === 'send_email')
        throw new Error('the process lost its way after the send');
      return r;
    },
  };
  await harness.startWorker({ effects });
  const { url } = await harness.startApi();
  h = Object.assign(harness, { url });
  ledger = new Ledger(h.ctx.redis, h.ctx.keys);
});
afterAll(async () => {
  await h.close();
});
beforeEach(() => {
  h.sandbox.reset();
  failAfterEmail = false;
});

let seq = 0;
async function startWithBudget(script: Script, budget: { maxSteps?: number; maxWallMs?: number }): Promise<string> {
  const spec = buildSpec(
    h.ctx,
    {
      tenant: 'acme',
      ticket: sampleTicket(`RTY-B-${++seq}-${Date.now()}`),
      agent: { model: 'scripted', script },
      budget,
    },
    Date.now(),
  );
  await h.ctx.store.create(spec, Date.now());
  return spec.runId;
}

const retry = (runId: string, body: unknown = {}, token?: string) =>
  call(h.url, 'POST', `/v1/runs/${runId}/retry`, body, token);
// An ended run's journal is packed (src/runs/compact.ts): its length is the transcript's, whatever form holds it.
const journalLength = async (runId: string) => (await h.ctx.store.transcript(runId)).length;
const emails = () => h.sandbox.counts().byResource.emails;

const ctl = (...args: string[]) => agentctl(h.url)(...args);

async function retriesCounted(outcome: string): Promise<number> {
  const m = await h.ctx.metrics.registry.getSingleMetric('agent_run_retries_total')!.get();
  return m.values.filter((v) => v.labels.outcome === outcome).reduce((s, v) => s + v.value, 0);
}

describe('retry a stopped run', () => {
  it('a failed run goes on from its last commit and sends no confirmed effect twice', async () => {
    failAfterEmail = true;
    // The ticket in a step of its own: the calls of one turn run at once, and this test needs it after the failure.
    const runId = await startScripted(h, [turn([email]), turn([ticketCall]), final], 'RTY');
    // Every attempt of step 1 fails after the email: BullMQ's attempts run out and the run ends failed.
    expect(await h.waitForStatus(runId, ['failed', 'completed'], 45_000)).toBe('failed');
    expect(emails().records).toBe(1);
    const k = h.ctx.keys.run(runId);
    const [emailAction] = (await ledger.listForRun(runId)).filter((e) => e.tool === 'send_email');
    expect(emailAction?.state).toBe('confirmed');
    // A finished run's keys carry the retention TTL.
    expect(await h.ctx.redis.pttl(k.run)).toBeGreaterThan(0);

    failAfterEmail = false;
    const requestsBefore = h.sandbox.counts().requests;
    const res = await retry(runId);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ runId, status: 'running', from: 'failed', step: 1, operator: 'operator' });
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('completed');

    // The email was answered from the ledger: one record, and the only new request was the ticket's.
    expect(emails().records).toBe(1);
    expect(h.sandbox.counts().byResource.tickets.records).toBe(1);
    expect(h.sandbox.counts().requests - requestsBefore).toBe(1);
    expect((await ledger.get(runId, emailAction!.actionId))?.attempts).toBe(1);
    const transcript = await h.ctx.store.transcript(runId);
    expect(transcript.find((e) => e.kind === 'operator')).toMatchObject({
      action: 'retry',
      by: 'operator',
      step: 1,
      detail: 'from=failed,steps=+0,tokens=+0,wall_ms=+0',
    });
    const events = (await readRunEvents(h.ctx, runId)).map((e) => e.type);
    expect(events).toContain('run_retried');
    expect(await retriesCounted('retried')).toBeGreaterThanOrEqual(1);
    // A second retry of the completed run is refused, naming the status.
    const again = await retry(runId);
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject({ error: 'not_retryable', status: 'completed' });
  });

  it("the retry makes a finished run's keys and ledger records persistent again", async () => {
    // After the retry the run parks for an approval (not finished): its keys must not expire meanwhile.
    const runId = await startWithBudget([turn([email]), turn([refund(10_000)]), final], { maxSteps: 1 });
    expect(await h.waitForStatus(runId, ['budget_exceeded', 'completed'])).toBe('budget_exceeded');
    // Compacted, as the reconciler's compactor does after the end (src/runs/compactor.ts): a packed run is retried.
    await new Compactor(h.ctx).drain();
    const k = h.ctx.keys.run(runId);
    const [action] = await ledger.listForRun(runId);
    const actionKey = h.ctx.keys.action(runId, action!.actionId);
    expect(await h.ctx.redis.pttl(actionKey)).toBeGreaterThan(0);
    expect((await retry(runId, { steps: 2 })).status).toBe(200);
    expect(await h.waitForStatus(runId, ['waiting_approval', 'completed', 'failed', 'budget_exceeded'])).toBe(
      'waiting_approval',
    );
    for (const key of [k.run, k.budget, k.journal, k.events, k.actions, k.eventsPacked, actionKey]) {
      expect(await h.ctx.redis.pttl(key), key).toBe(-1);
    }
    // The reservation was let go when the run ended (src/runs/compact.ts): the record names the same key and a plan
    // reads the record first.
    const reservation = await h.ctx.redis.hget(actionKey, 'reservationKey');
    expect(await h.ctx.redis.exists(reservation!)).toBe(0);
    expect(await h.ctx.redis.hget(actionKey, 'idempotencyKey')).toBe(action!.idempotencyKey);
    // The ended run's history was folded into the record (src/runs/compact.ts): the list is gone, or a later move
    // started it again, persistent like the record.
    expect([-2, -1]).toContain(await h.ctx.redis.pttl(h.ctx.keys.actionHistory(actionKey)));
    expect((await ledger.history(runId, action!.actionId)).map((m) => m.to)).toContain('confirmed');
    expect(emails().records).toBe(1);
  });

  it('a packed spec that no longer inflates: 409 invalid_spec naming the packed form, nothing written', async () => {
    const runId = await startWithBudget([turn([ticketCall]), turn([ticketCall]), final], { maxSteps: 1 });
    expect(await h.waitForStatus(runId, ['budget_exceeded', 'completed'])).toBe('budget_exceeded');
    await new Compactor(h.ctx).drain();
    const k = h.ctx.keys.run(runId);
    const stored = (await h.ctx.redis.hget(k.run, 'spec'))!;
    expect(stored.startsWith('~')).toBe(true);
    // The packed form's bytes damaged (a partial write, a restore from a bad copy): it no longer inflates.
    await h.ctx.redis.hset(k.run, 'spec', `~${Buffer.from('not deflate at all').toString('base64')}`);
    const before = await journalLength(runId);
    const r = await retry(runId, { steps: 2 });
    expect(r).toMatchObject({ status: 409, body: { error: 'invalid_spec', runId, field: 'packed' } });
    expect(await h.ctx.redis.hget(k.run, 'status')).toBe('budget_exceeded');
    expect(await journalLength(runId)).toBe(before);
    // The run is still shown, as it ended.
    expect(await call(h.url, 'GET', `/v1/runs/${runId}`)).toMatchObject({
      status: 200,
      body: { runId, status: 'budget_exceeded' },
    });
  });

  it('budget_exceeded: refused without an extension; agentctl retry --steps extends it, journalled with who, carried to every later step', async () => {
    const runId = await startWithBudget([turn([email]), turn([email2]), turn([ticketCall]), final], { maxSteps: 1 });
    expect(await h.waitForStatus(runId, ['budget_exceeded', 'completed'])).toBe('budget_exceeded');
    const before = await journalLength(runId);

    const bare = await retry(runId);
    expect(bare.status).toBe(409);
    expect(bare.body).toMatchObject({ error: 'extension_required', budget: 'steps' });
    const refused = await ctl('retry', runId);
    expect(refused.code).toBe(1);
    expect(JSON.parse(refused.out)).toMatchObject({ error: 'extension_required' });
    expect(await journalLength(runId)).toBe(before);
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')).toBe('budget_exceeded');

    const deadlineBefore = Number(await h.ctx.redis.hget(h.ctx.keys.run(runId).budget, 'deadlineAt'));
    const startedAt = Date.now();
    const ok = await ctl('retry', runId, '--steps', '5', '--wall-ms', '600000');
    expect(ok.code).toBe(0);
    const answer = JSON.parse(ok.out) as {
      limits: { maxSteps: number; deadlineAt: number; maxWallMs: number };
      extension: unknown;
    };
    expect(answer.extension).toEqual({ steps: 5, tokens: 0, wallMs: 600_000, cost: 0 });
    expect(answer.limits.maxSteps).toBe(6);
    expect(answer.limits.deadlineAt).toBeGreaterThanOrEqual(Math.max(deadlineBefore, startedAt) + 600_000);
    // Steps 2, 3 and 4 each run under the extended limits (a step job that lost them would stop at once).
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'budget_exceeded', 'needs_human'])).toBe('completed');
    expect(emails().records).toBe(2);
    expect(h.sandbox.counts().byResource.tickets.records).toBe(1);

    const entry = (await h.ctx.store.transcript(runId)).find((e) => e.kind === 'operator');
    expect(entry).toMatchObject({
      action: 'retry',
      by: 'operator',
      detail: 'from=budget_exceeded,steps=+5,tokens=+0,wall_ms=+600000',
    });
    const budget = await h.ctx.redis.hgetall(h.ctx.keys.run(runId).budget);
    expect(budget).toMatchObject({ maxSteps: '6', extensions: '1', stepsUsed: '4' });
    const view = await call<{ budget: { limits: { maxSteps: number } } }>(h.url, 'GET', `/v1/runs/${runId}`);
    expect(view.body.budget.limits.maxSteps).toBe(6);
    expect(await retriesCounted('extension_required')).toBeGreaterThanOrEqual(2);
    // The offline replay applies the journalled extension where it was made: all four steps, as the run went.
    const spec = (await h.ctx.store.readSpec(runId))!;
    const agent = h.ctx.agents.get(spec.agent)!;
    const caps = {
      completionCap: h.cfg.COMPLETION_TOKEN_CAP,
      inputTokens: agent.estimateInputTokens(spec.input),
      tools: agent.tools.specs,
    };
    expect(replayRun(spec, await h.ctx.store.transcript(runId), caps)).toMatchObject({
      completed: true,
      stepsReplayed: 4,
    });
  });

  it("an extended run keeps its money cap through an approval's resume: the resumed job's limits hold maxCost", async () => {
    // 100,000 µ$ a turn at the scripted model's nominal $1 in per million tokens.
    const read = { name: 'read_ticket', args: {} };
    const big = turn([read], { usage: { promptTokens: 100_000, completionTokens: 0 } });
    const script = [turn([read]), turn([refund(10_000)]), big, big, big, big, final];
    const spec = buildSpec(
      h.ctx,
      {
        tenant: 'acme',
        ticket: sampleTicket(`RTY-COST-${++seq}-${Date.now()}`),
        agent: { model: 'scripted', script },
        budget: { maxSteps: 1, maxTokens: 5_000_000, maxCost: 150_000 },
      },
      Date.now(),
    );
    await h.ctx.store.create(spec, Date.now());
    const runId = spec.runId;
    expect(await h.waitForStatus(runId, ['budget_exceeded', 'completed'])).toBe('budget_exceeded');
    expect((await retry(runId, { steps: 20 })).status).toBe(200);
    expect(await h.waitForStatus(runId, ['waiting_approval', 'completed', 'budget_exceeded'])).toBe('waiting_approval');
    const pending = await call<{ approvals: { actionId: string; runId: string; fingerprint: string }[] }>(
      h.url,
      'GET',
      '/v1/approvals',
    );
    const item = pending.body.approvals.find((a) => a.runId === runId)!;
    const approved = await call(h.url, 'POST', `/v1/approvals/${item.actionId}`, {
      decision: 'approve',
      fingerprint: item.fingerprint,
      approver: 'alice',
    });
    expect(approved.status).toBeLessThan(300);
    // The resume's job carries the extended limits whole, the money cap among them.
    const jobs = await h.ctx.queues.forRun(runId).getJobs(['waiting', 'active', 'delayed', 'prioritized', 'completed']);
    const resumed = jobs.find((j) => j?.id === `${runId}.s2.r2`);
    expect((resumed?.data as { limits?: { maxCost?: number } } | undefined)?.limits?.maxCost).toBe(150_000);

    const ended = await h.waitForStatus(runId, ['completed', 'budget_exceeded', 'failed', 'needs_human']);
    expect(ended).toBe('budget_exceeded');
    const budget = await h.ctx.redis.hgetall(h.ctx.keys.run(runId).budget);
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'reason')).toMatch(/^cost: /);
    // At most one attempt past the cap (the documented bound), where the job without maxCost spent 400,060.
    expect(Number(budget.costUsed)).toBeLessThanOrEqual(150_000 + 100_100);
  });

  it('wall clock: a run past its deadline needs more wall clock, counted from the retry', async () => {
    const runId = await startWithBudget([turn([email]), final], { maxWallMs: 1 });
    expect(await h.waitForStatus(runId, ['budget_exceeded', 'completed'])).toBe('budget_exceeded');
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'reason')).toMatch(/^wall_clock:/);
    const more = await retry(runId, { steps: 3 });
    expect(more.status).toBe(409);
    expect(more.body).toMatchObject({ error: 'extension_required', budget: 'wall_clock' });
    const startedAt = Date.now();
    const ok = await retry(runId, { wallMs: 60_000 });
    expect(ok.status).toBe(200);
    const limits = (ok.body as { limits: { deadlineAt: number; maxWallMs: number } }).limits;
    expect(limits.deadlineAt).toBeGreaterThanOrEqual(startedAt + 60_000);
    expect(limits.maxWallMs).toBe(60_001);
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'budget_exceeded'])).toBe('completed');
    expect(emails().records).toBe(1);
  });

  it('needs_human with an action waiting for a person: refused until it is resolved', async () => {
    h.sandbox.setFaults([
      { kind: 'lost_response_after_commit', resource: 'emails', count: 1 },
      { kind: 'no_lookup', resource: 'emails' },
    ]);
    const runId = await startScripted(h, [turn([email]), final], 'RTY');
    expect(await h.waitForStatus(runId, ['needs_human', 'completed', 'failed'])).toBe('needs_human');
    const [action] = await ledger.listForRun(runId);
    const before = await journalLength(runId);
    const res = await retry(runId);
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ error: 'action_waiting', actionId: action!.actionId });
    expect(await journalLength(runId)).toBe(before);
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')).toBe('needs_human');
    expect(emails().records).toBe(1);
  });

  it('refuses other statuses (409 naming it), unknown runs (404), bad bodies (400 naming the field) and missing credentials, writing nothing', async () => {
    const runId = await startScripted(h, [final], 'RTY');
    expect(await h.waitForStatus(runId, ['completed', 'failed'])).toBe('completed');
    const before = await journalLength(runId);
    const done = await retry(runId);
    expect(done.status).toBe(409);
    expect(done.body).toMatchObject({ error: 'not_retryable', status: 'completed' });

    expect((await retry('r_000000000000000000000000')).status).toBe(404);
    expect((await retry(`${runId}:journal`)).status).toBe(404);
    expect((await retry(runId, {}, '')).status).toBe(401);
    for (const [body, field] of [
      [{ steps: -1 }, 'steps'],
      [{ tokens: 1.5 }, 'tokens'],
      [{ wallMs: 'soon' }, 'wallMs'],
      [{ steps: 1, why: 'x' }, '(body)'],
    ] as const) {
      const bad = await retry(runId, body);
      expect(bad.status, JSON.stringify(body)).toBe(400);
      expect((bad.body as { fields: { path: string }[] }).fields.map((f) => f.path)).toContain(field);
    }
    expect(await journalLength(runId)).toBe(before);
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')).toBe('completed');
  });

  it('an extension past the deployment limit is 400 naming the field, and nothing changes', async () => {
    const runId = await startWithBudget([turn([email]), final], { maxSteps: 1 });
    expect(await h.waitForStatus(runId, ['budget_exceeded', 'completed'])).toBe('budget_exceeded');
    const res = await retry(runId, { steps: h.cfg.LIMIT_MAX_STEPS });
    expect(res.status).toBe(400);
    expect((res.body as { fields: { path: string }[] }).fields[0]?.path).toBe('steps');
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).budget, 'maxSteps')).toBe('1');
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')).toBe('budget_exceeded');
  });
});
