/**
 * Agents that call agents through the real entry points: an API process and worker processes loading the
 * triage-refunds example (AGENTS_MODULE). A triage run hands a refund to the refunds agent: the child run
 * completes, the triage run resumes with its answer and completes, and the run view shows the tree. A worker
 * SIGKILLed right after the child's start (before the parent's park is committed) and one SIGKILLed at the
 * parent's resume (the child's outcome read, nothing written): another worker finishes, with exactly one child
 * and the child's spend charged to the parent once. A worker SIGKILLed right after the child's last commit, before
 * it promoted its parent's wake job (the child's end signal lost): the stuck-run sweep wakes the parent, which
 * resumes with the child's answer once, counted and told on its events. A worker SIGKILLed right after the
 * parent's park, before it added the parent's wake job: the child ends with no job to promote, and the sweep's
 * re-created wake job is due at once.
 *
 * The triage run acts on the child's outcome: a refund within the limit (the child's verdict `refunded`) is told to
 * the customer as made, with no task for a person; one above it (verdict `needs_person`) and a child that stopped (a
 * tool error) are handed to a person: one task in the help desk (the sandbox's Zendesk), and the customer told a
 * person will follow up.
 */
import type { ChildProcess } from 'node:child_process';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Reconciler } from '../../src/ledger/reconciler.js';
import { createHarness, producerAuth, type Harness } from '../../testkit/harness.js';
import { killAll, spawnApi, spawnWorker, type WorkerProcess } from '../../testkit/processes.js';
import { readRunEvents } from '../../testkit/runEvents.js';
import { CUSTOMER_REPLIES } from '../../examples/triage-refunds/index.js';

const AGENTS_MODULE = 'examples/triage-refunds/index.ts';
const ENDED = ['completed', 'failed', 'budget_exceeded', 'cancelled', 'needs_human'];
/** Each scripted turn of the example spends 70 tokens; each agent takes two turns (triage three to hand off). */
const TURN_TOKENS = 70;
const OPERATOR_TOKEN = 'operator-token-for-tests';
let h: Harness;
let api: string;
const processes: ChildProcess[] = [];

beforeEach(async () => {
  h = await createHarness('children-e2e', { AGENTS_MODULE, STUCK_RUN_MIN_AGE_MS: '500', OPERATOR_TOKEN });
  api = await startApiProcess();
}, 120_000);
afterEach(async () => {
  killAll(processes);
  await h.close();
});

async function startApiProcess(): Promise<string> {
  const api = await spawnApi(h.env);
  processes.push(api.child);
  return api.url;
}

/** A worker process; a victim (crash point armed) has short locks so its job is taken over quickly. */
async function worker(crashPoint?: string): Promise<WorkerProcess> {
  const victim: Record<string, string> = crashPoint
    ? { CRASH_POINTS: crashPoint, LOCK_DURATION_MS: '1000', STALLED_INTERVAL_MS: '500' }
    : {};
  const w = await spawnWorker({ ...h.env, ...victim });
  processes.push(w.child);
  return w;
}

async function call(path: string, body?: unknown, auth: Record<string, string> = producerAuth) {
  const res = await fetch(`${api}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { 'content-type': 'application/json', ...auth },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function startTriage(ticketId: string, amountCents = 20_00): Promise<string> {
  const input = { ticketId, text: 'The mug arrived broken, please refund it.', orderId: `O-${ticketId}`, amountCents };
  const r = await call('/v1/runs', { tenant: 'acme', agent: 'triage', input, model: 'scripted' });
  expect(r.status).toBe(201);
  return r.body.runId as string;
}

/** Every run of the refunds agent in the run index: the children that exist, however many were started. */
async function refundRuns(): Promise<string[]> {
  const { redis, keys } = h.ctx;
  const ids = (await Promise.all(keys.allShards().map((s) => redis.zrange(keys.runIndex(s), 0, -1)))).flat();
  const agents = await Promise.all(ids.map((id) => redis.hget(keys.run(id).run, 'agent')));
  return ids.filter((_, i) => agents[i] === 'refunds');
}

async function expectOneChildAndCharged(parent: string): Promise<void> {
  expect(await h.waitForStatus(parent, ENDED, 60_000)).toBe('completed');
  const view = await call(`/v1/runs/${parent}`);
  const children = view.body.children as { runId: string; status: string }[];
  expect(children).toHaveLength(1);
  expect(children[0]!.status).toBe('completed');
  expect(await refundRuns()).toEqual([children[0]!.runId]);
  // The parent's two turns and the child's two, the child's charged once.
  expect((view.body.budget as { used: { tokens: number } }).used.tokens).toBe(4 * TURN_TOKENS);
}

/** The run's final answer: what the customer is told. */
async function finalAnswer(runId: string): Promise<string | undefined> {
  const decisions = (await h.ctx.store.transcript(runId)).filter((e) => e.kind === 'decision');
  return decisions.at(-1)?.final;
}

/** Exactly one task in the help desk, counted by the desk (the sandbox), for this ticket and this run's action. */
async function expectOneTaskForAPerson(parent: string, ticketId: string): Promise<void> {
  const tasks = h.sandbox.records('tickets');
  expect(tasks).toHaveLength(1);
  const [handOff] = (await h.ctx.store.transcript(parent)).filter(
    (e) => e.kind === 'observation' && e.tool === 'hand_to_person',
  );
  expect(tasks[0]!.resource).toMatchObject({
    external_id: (handOff as { actionId?: string }).actionId,
    subject: expect.stringContaining(`ticket ${ticketId}`),
    tags: ['refund', 'needs_person'],
  });
  expect(h.sandbox.counts().byResource.tickets.records).toBe(1);
}

describe('agents that call agents, in real processes', { timeout: 180_000 }, () => {
  it('the example: triage hands a refund to the refunds agent and answers with its result', async () => {
    await worker();
    const refused = await call('/v1/runs', { tenant: 'acme', agent: 'triage', input: { ticketId: 'T-0' } });
    expect(refused.status).toBe(400);
    const parent = await startTriage('T-1');
    expect(await h.waitForStatus(parent, ENDED, 60_000)).toBe('completed');
    const view = await call(`/v1/runs/${parent}`);
    const [child] = view.body.children as { runId: string; status: string }[];
    expect(child).toMatchObject({ status: 'completed' });
    const childView = await call(`/v1/runs/${child!.runId}`);
    expect(childView.body).toMatchObject({ parentRunId: parent, tenant: 'acme', agent: { name: 'refunds' } });
    const transcript = view.body.transcript as { kind: string; output?: unknown }[];
    expect(transcript.find((e) => e.kind === 'observation')?.output).toEqual({
      childRunId: child!.runId,
      answer: 'refunded: refund of 2000 cents on O-T-1 approved.',
    });
    await expectOneChildAndCharged(parent);
    expect(await finalAnswer(parent)).toBe(CUSTOMER_REPLIES.refunded);
    expect(h.sandbox.records('tickets')).toEqual([]);
  });

  it('a refund above the limit: the child answers needs_person, triage hands it to a person and says so', async () => {
    await worker();
    const parent = await startTriage('T-6', 90_00);
    expect(await h.waitForStatus(parent, ENDED, 60_000)).toBe('completed');
    const view = await call(`/v1/runs/${parent}`);
    const [child] = view.body.children as { runId: string; status: string }[];
    expect(child).toMatchObject({ status: 'completed' });
    const observations = (view.body.transcript as { kind: string; tool?: string; status?: string; output?: unknown }[])
      .filter((e) => e.kind === 'observation')
      .map((e) => [e.tool, e.status, e.output]);
    expect(observations).toEqual([
      [
        'hand_to_refunds',
        'ok',
        {
          childRunId: child!.runId,
          answer: 'needs_person: refund of 9000 cents on O-T-6 is above the 5000-cent limit.',
        },
      ],
      ['hand_to_person', 'ok', { taskId: expect.any(String) }],
    ]);
    expect(await finalAnswer(parent)).toBe(CUSTOMER_REPLIES.person);
    await expectOneTaskForAPerson(parent, 'T-6');
    // The parent's three turns and the child's two, the child's charged once.
    expect((view.body.budget as { used: { tokens: number } }).used.tokens).toBe(5 * TURN_TOKENS);
  });

  it('a child that stopped (cancelled): the tool error goes to a person, the customer is told one will follow up', async () => {
    // The worker dies right after the child's start: the child waits in the queue, and is cancelled there.
    const victim = await worker('after_child_started@1');
    const parent = await startTriage('T-7');
    expect((await victim.exited).signal).toBe('SIGKILL');
    const [child] = await h.ctx.redis.smembers(h.ctx.keys.run(parent).children);
    const cancelled = await call(`/v1/runs/${child}/cancel`, {}, { authorization: `Bearer ${OPERATOR_TOKEN}` });
    expect(cancelled.status).toBeLessThan(300);
    await worker();
    expect(await h.waitForStatus(parent, ENDED, 60_000)).toBe('completed');
    expect(await h.waitForStatus(child!, ENDED, 60_000)).toBe('cancelled');
    const transcript = (await h.ctx.store.transcript(parent)).filter((e) => e.kind === 'observation');
    expect(transcript.map((e) => [e.tool, e.status])).toEqual([
      ['hand_to_refunds', 'tool_error'],
      ['hand_to_person', 'ok'],
    ]);
    expect(transcript[0]!.output).toMatchObject({ error: 'child_cancelled', childRunId: child });
    expect(await finalAnswer(parent)).toBe(CUSTOMER_REPLIES.person);
    await expectOneTaskForAPerson(parent, 'T-7');
  });

  it("a worker SIGKILLed right after the child's start: the redelivered step finds it, one child", async () => {
    const victim = await worker('after_child_started@1');
    const parent = await startTriage('T-2');
    expect((await victim.exited).signal).toBe('SIGKILL');
    await worker();
    await expectOneChildAndCharged(parent);
  });

  it("a worker SIGKILLed at the parent's resume: another worker resumes it once, one child", async () => {
    const victim = await worker('before_child_resume@2');
    const parent = await startTriage('T-3');
    expect((await victim.exited).signal).toBe('SIGKILL');
    expect(await h.ctx.redis.hget(h.ctx.keys.run(parent).run, 'status')).toBe('waiting_child');
    await worker();
    await expectOneChildAndCharged(parent);
  });

  it('a child whose end signal was lost (its worker SIGKILLed after its last commit): the sweep wakes the parent once', async () => {
    // The refunds child's last step is 2; the triage parent's step 2 only runs after its wake.
    const victim = await worker('after_commit@2');
    const parent = await startTriage('T-4');
    expect((await victim.exited).signal).toBe('SIGKILL');
    const { redis, keys, queues, metrics } = h.ctx;
    const [child] = await redis.smembers(keys.run(parent).children);
    expect(await redis.hget(keys.run(child!).run, 'status')).toBe('completed');
    // The parent still waits, its wake job delayed to its deadline: nothing else would wake it for minutes.
    expect(await redis.hget(keys.run(parent).run, 'status')).toBe('waiting_child');
    const jobId = (await redis.hget(keys.run(parent).run, 'jobId'))!;
    expect(await (await queues.forRun(parent).getJob(jobId))!.getState()).toBe('delayed');
    await worker();
    const recovered = async () =>
      (await metrics.childRuns.get()).values.find((v) => v.labels.event === 'wake_recovered')?.value ?? 0;
    const before = await recovered();
    // As the reconciler process sweeps, past STUCK_RUN_MIN_AGE_MS.
    await new Reconciler(h.ctx, 'reconciler:children-e2e').sweep(Date.now() + 1000);
    await expectOneChildAndCharged(parent);
    expect(await recovered()).toBe(before + 1);
    const types = (await readRunEvents({ redis, keys }, parent)).map((e) => e.type);
    expect(types.filter((t) => t === 'wake_recovered')).toHaveLength(1);
    expect(types.filter((t) => t === 'woke')).toHaveLength(1);
    const transcript = (await h.ctx.store.transcript(parent)).filter((e) => e.kind === 'observation');
    expect(transcript.map((e) => (e as { output: unknown }).output)).toEqual([
      { childRunId: child, answer: 'refunded: refund of 2000 cents on O-T-4 approved.' },
    ]);
  });

  it("a parent's wake job lost at its park: the sweep re-creates it due at once when the child has ended", async () => {
    const victim = await worker('after_commit@1');
    const parent = await startTriage('T-5');
    expect((await victim.exited).signal).toBe('SIGKILL');
    const { redis, keys, queues, metrics } = h.ctx;
    expect(await redis.hget(keys.run(parent).run, 'status')).toBe('waiting_child');
    const jobId = (await redis.hget(keys.run(parent).run, 'jobId'))!;
    expect(await queues.forRun(parent).getJob(jobId)).toBeUndefined();
    await worker();
    const [child] = await redis.smembers(keys.run(parent).children);
    expect(await h.waitForStatus(child!, ENDED, 60_000)).toBe('completed');
    const recreated = async () =>
      (await metrics.waits.get()).values.find((v) => v.labels.kind === 'child' && v.labels.outcome === 'job_recreated')
        ?.value ?? 0;
    const before = await recreated();
    // One sweep: the job it adds is due now, not at the parent's deadline minutes away.
    await new Reconciler(h.ctx, 'reconciler:children-e2e').sweep(Date.now() + 1000);
    expect(await recreated()).toBe(before + 1);
    await expectOneChildAndCharged(parent);
  });
});
