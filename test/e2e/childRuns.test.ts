/**
 * Agents that call agents through the real entry points: an API process and worker processes loading the
 * triage-refunds example (AGENTS_MODULE). A triage run hands a refund to the refunds agent: the child run
 * completes, the triage run resumes with its answer and completes, and the run view shows the tree. A worker
 * SIGKILLed right after the child's start (before the parent's park is committed) and one SIGKILLed at the
 * parent's resume (the child's outcome read, nothing written): another worker finishes, with exactly one child
 * and the child's spend charged to the parent once.
 */
import type { ChildProcess } from 'node:child_process';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHarness, producerAuth, type Harness } from '../../testkit/harness.js';
import { killAll, spawnApi, spawnWorker, type WorkerProcess } from '../../testkit/processes.js';

const AGENTS_MODULE = 'examples/triage-refunds/index.ts';
const ENDED = ['completed', 'failed', 'budget_exceeded', 'cancelled', 'needs_human'];
/** Each scripted turn of the example spends 70 tokens; each agent takes two turns. */
const TURN_TOKENS = 70;
let h: Harness;
let api: string;
const processes: ChildProcess[] = [];

beforeEach(async () => {
  h = await createHarness('children-e2e', { AGENTS_MODULE, STUCK_RUN_MIN_AGE_MS: '500' });
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

async function call(path: string, body?: unknown) {
  const res = await fetch(`${api}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { 'content-type': 'application/json', ...producerAuth },
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
      answer: 'Refund of 2000 cents on O-T-1 approved.',
    });
    await expectOneChildAndCharged(parent);
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
});
