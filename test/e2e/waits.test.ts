/**
 * Waits through the real entry points: an API process and worker processes loading the ask-and-wait example
 * agent (AGENTS_MODULE). A sleep parks the run `sleeping` with its wake time in the run view, holds no worker,
 * and survives its worker's SIGKILL; an event delivered twice resumes the run once; a timeout resumes it with the
 * timeout result; a delivery before the wait is kept and answers it; a sleeping run is cancelled at once.
 */
import type { ChildProcess } from 'node:child_process';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHarness, producerAuth, type Harness } from '../../testkit/harness.js';
import { startEmbeddedRedis, type EmbeddedRedis } from '../../testkit/embeddedRedis.js';
import { killAll, spawnApi, spawnWorker, type WorkerProcess } from '../../testkit/processes.js';
import { readRunEvents } from '../../testkit/runEvents.js';

const AGENTS_MODULE = 'examples/ask-and-wait/index.ts';
const OPERATOR_TOKEN = 'operator-token-for-tests';
const usage = { promptTokens: 50, completionTokens: 5 };
let h: Harness;
let api: string;
/** Its own redis-server (AOF always) for the test that restarts it; else the shared one. */
let redis: EmbeddedRedis | undefined;
const children: ChildProcess[] = [];

beforeEach(async (t) => {
  redis = t.task.name.includes('Redis restart') ? await startEmbeddedRedis({ appendfsync: 'always' }) : undefined;
  h = await createHarness('waits', {
    AGENTS_MODULE,
    OPERATOR_TOKEN,
    STUCK_RUN_MIN_AGE_MS: '500',
    ...(redis ? { REDIS_URL: redis.url } : {}),
  });
  api = await startApiProcess();
}, 120_000);
afterEach(async () => {
  killAll(children);
  await h.close();
  await redis?.stop();
});

async function startApiProcess(): Promise<string> {
  const api = await spawnApi(h.env);
  children.push(api.child);
  return api.url;
}

async function worker(): Promise<WorkerProcess> {
  const w = await spawnWorker(h.env);
  children.push(w.child);
  return w;
}

async function call(path: string, body?: unknown, auth = producerAuth) {
  const res = await fetch(`${api}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { 'content-type': 'application/json', ...auth },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function start(requestId: string, first: { name: string; args: unknown }): Promise<string> {
  const script = [
    { toolCalls: [first], usage },
    { toolCalls: [], final: 'done', usage },
  ];
  const input = { requestId, question: 'Which size?' };
  const r = await call('/v1/runs', { tenant: 'acme', agent: 'ask-and-wait', input, model: 'scripted', script });
  expect(r.status).toBe(201);
  return r.body.runId as string;
}

const observations = async (runId: string) =>
  (await h.ctx.store.transcript(runId)).filter((e) => e.kind === 'observation');

describe('waits', { timeout: 120_000 }, () => {
  it('a sleep parks the run sleeping (wake time in its view, no worker held) and survives its worker SIGKILL', async () => {
    const a = await worker();
    const runId = await start('W-1', { name: 'check_back_later', args: { seconds: 3 } });
    expect(await h.waitForStatus(runId, ['sleeping'])).toBe('sleeping');
    const view = await call(`/v1/runs/${runId}`);
    const wakeAt = Date.parse((view.body.wait as { wakeAt: string }).wakeAt);
    expect(view.body.wait).toMatchObject({ kind: 'sleep' });
    const queue = h.ctx.queues.forRun(runId);
    expect(await queue.getJobCounts('active', 'delayed')).toEqual({ active: 0, delayed: 1 });
    a.child.kill('SIGKILL');
    await a.exited;
    await worker();
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'], 20_000)).toBe('completed');
    const woke = (await readRunEvents(h.ctx, runId)).find((e) => e.type === 'woke');
    expect(Number(woke!.entry.split('-')[0])).toBeGreaterThanOrEqual(wakeAt);
  });

  it('a sleep survives a Redis restart: the delayed wake job is in the AOF', async () => {
    await worker();
    const runId = await start('W-6', { name: 'check_back_later', args: { seconds: 4 } });
    expect(await h.waitForStatus(runId, ['sleeping'])).toBe('sleeping');
    await redis!.kill('SIGKILL');
    await redis!.restart();
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'], 30_000)).toBe('completed');
    expect((await observations(runId)).map((o) => Object.keys(o.output as object))).toEqual([['sleptUntil']]);
  });

  it('an event delivered twice resumes the run once, with the payload as the call result', async () => {
    await worker();
    const runId = await start('W-2', { name: 'wait_for_reply', args: { requestId: 'W-2', timeoutSeconds: 60 } });
    expect(await h.waitForStatus(runId, ['waiting_event'])).toBe('waiting_event');
    const deliver = () =>
      call('/v1/events', { agent: 'ask-and-wait', tenant: 'acme', key: 'reply:W-2', payload: { size: 'M' } });
    const answers = await Promise.all([deliver(), deliver()]);
    // One resumes the wait. The other finds that delivery not yet consumed (409), or, when the run consumed it first,
    // no wait on the key and is kept for a wait to come (202 kept, docs/http-api.md): never a second resume.
    const resumed = answers.filter((a) => a.body.outcome === 'resumed');
    expect(resumed.map((a) => [a.status, a.body])).toEqual([[202, { outcome: 'resumed', runId }]]);
    const other = answers.find((a) => !resumed.includes(a))!;
    if (other.status === 202) expect(other.body).toMatchObject({ outcome: 'kept' });
    else expect(other).toMatchObject({ status: 409, body: { error: 'duplicate_delivery' } });
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'], 20_000)).toBe('completed');
    expect((await observations(runId)).map((o) => o.output)).toEqual([{ event: { size: 'M' } }]);
  });

  it('the timeout resumes the run with the timeout result', async () => {
    await worker();
    const runId = await start('W-3', { name: 'wait_for_reply', args: { requestId: 'W-3', timeoutSeconds: 1.5 } });
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'], 20_000)).toBe('completed');
    expect((await observations(runId)).map((o) => o.output)).toEqual([{ timedOut: true }]);
    // A delivery after the timeout is kept for a wait to come, not given to the run that timed out.
    const late = await call('/v1/events', { agent: 'ask-and-wait', tenant: 'acme', key: 'reply:W-3', payload: 'late' });
    expect(late.body.outcome).toBe('kept');
  });

  it('a delivery before the wait is kept and answers the wait at once', async () => {
    const early = await call('/v1/events', {
      agent: 'ask-and-wait',
      tenant: 'acme',
      key: 'reply:W-4',
      payload: { size: 'L' },
    });
    expect(early).toMatchObject({ status: 202, body: { outcome: 'kept' } });
    await worker();
    const runId = await start('W-4', { name: 'wait_for_reply', args: { requestId: 'W-4', timeoutSeconds: 60 } });
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'], 20_000)).toBe('completed');
    expect((await observations(runId)).map((o) => o.output)).toEqual([{ event: { size: 'L' } }]);
    const other = await call('/v1/events', { agent: 'ask-and-wait', tenant: 'other', key: 'reply:W-4', payload: 1 });
    expect(other.body.outcome).toBe('kept');
  });

  it('a sleeping run is cancelled at once and its wake job leaves the queue', async () => {
    await worker();
    const runId = await start('W-5', { name: 'check_back_later', args: { seconds: 600 } });
    expect(await h.waitForStatus(runId, ['sleeping'])).toBe('sleeping');
    const cancel = await call(`/v1/runs/${runId}/cancel`, {}, { authorization: `Bearer ${OPERATOR_TOKEN}` });
    expect(cancel).toMatchObject({ status: 200, body: { status: 'cancelled', cancelled: 'now' } });
    expect(await h.ctx.queues.forRun(runId).getJobCounts('delayed')).toEqual({ delayed: 0 });
  });
});
