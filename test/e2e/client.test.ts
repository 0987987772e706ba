/**
 * durable-agent-fleet/client against the real API (an API process on its own Redis): a run created once across a
 * store that goes away and comes back (503 + Retry-After, asked again as it was: no key, the subject's run) and a
 * follow-up created once across a lost answer (asked again with the same Idempotency-Key); list and search with the API's filters; typed refusals; and a run's events followed across an API
 * process restart (SIGKILL, then a new process on the same port) with no event missed or repeated.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  Conflict,
  FleetClient,
  InvalidRequest,
  RunNotFound,
  Unauthorized,
  type RunEventMessage,
} from '../../src/client/index.js';
import { createEffectRunner } from '../../src/ledger/runner.js';
import { approvalPolicy } from '../../src/ledger/approvals.js';
import { createHarness, PRODUCER_TOKEN, sampleTicket, type Harness } from '../../testkit/harness.js';
import { startEmbeddedRedis, type EmbeddedRedis } from '../../testkit/embeddedRedis.js';
import { killAll, spawnApi, type SpawnedProcess } from '../../testkit/processes.js';
import { readRunEvents } from '../../testkit/runEvents.js';
import { final, read, refundCall, turn } from '../../testkit/turns.js';
import { until } from '../../testkit/until.js';

const OPERATOR_TOKEN = 'client-test-operator';
let redis: EmbeddedRedis;
let h: Harness;
let api: SpawnedProcess & { url: string };
const procs: SpawnedProcess[] = [];

beforeAll(async () => {
  redis = await startEmbeddedRedis({ appendfsync: 'always' });
  h = await createHarness('client', {
    REDIS_URL: redis.url,
    OPERATOR_TOKEN,
    APPROVAL_RULES: JSON.stringify([{ tool: 'refund', minAmountCents: 5000 }]),
    STORE_RETRY_AFTER_S: '1',
  });
  await h.startWorker({ effects: createEffectRunner(h.ctx, { approvals: approvalPolicy(h.cfg.APPROVAL_RULES) }) });
  api = await spawnApi(h.env);
  procs.push(api);
}, 120_000);

afterAll(async () => {
  killAll(procs);
  await h?.close();
  await redis?.stop();
});

let seq = 0;
const body = (script: unknown[] = [final]) => ({
  tenant: 'acme',
  ticket: sampleTicket(`CL-${++seq}-${Date.now()}`),
  agent: { model: 'scripted' as const, script: script as never },
});

/** A fetch that records each request's Idempotency-Key and answer status. */
function recording() {
  const seen: { key: string | null; status: number | 'no answer' }[] = [];
  let loseNext = false;
  const fetchFn: typeof fetch = async (input, init) => {
    const key = new Headers(init?.headers).get('idempotency-key');
    const res = await fetch(input, init);
    if (loseNext) {
      // The request reached the API and was answered; the answer is lost on the way back.
      loseNext = false;
      seen.push({ key, status: 'no answer' });
      throw new TypeError('fetch failed', { cause: { code: 'ECONNRESET' } });
    }
    seen.push({ key, status: res.status });
    return res;
  };
  return { seen, fetchFn, loseAnswer: () => (loseNext = true) };
}

describe('FleetClient', () => {
  it('creates a run once across a store that goes away and comes back: 503s asked again as they were', async () => {
    const rec = recording();
    const client = new FleetClient({ url: api.url, token: PRODUCER_TOKEN, fetch: rec.fetchFn });
    await redis.kill();
    await until(
      'the API answers 503 for the store',
      20_000,
      async () => (await fetch(`${api.url}/readyz`)).status === 503,
    );
    // The store comes back once the API has refused the create at least once.
    const back = until('a 503 answer', 20_000, () => rec.seen.some((s) => s.status === 503)).then(() =>
      redis.restart(),
    );
    const created = await client.createRun(body());
    await back;
    expect(created.created).toBe(true);
    expect(rec.seen.filter((s) => s.status === 503).length).toBeGreaterThan(0);
    expect(new Set(rec.seen.map((s) => s.key)).size).toBe(1);
    expect(rec.seen.at(-1)!.status).toBe(201);
    expect(await h.waitForStatus(created.runId, ['completed', 'failed'])).toBe('completed');
  }, 90_000);

  it('a lost answer is asked again with the same Idempotency-Key: one run, named as the lost answer named it', async () => {
    const rec = recording();
    const client = new FleetClient({ url: api.url, token: PRODUCER_TOKEN, fetch: rec.fetchFn });
    const b = body();
    const first = await client.createRun(b);
    expect(await h.waitForStatus(first.runId, ['completed', 'failed'])).toBe('completed');
    // A follow-up on the same subject (a new key: a new event) whose 201 (naming the first run) is lost: the retry's
    // 200 names it too.
    rec.loseAnswer();
    const again = await client.createRun(b, { idempotencyKey: `follow-up-${seq}` });
    expect(rec.seen.map((s) => s.status)).toEqual([201, 'no answer', 200]);
    expect(rec.seen.map((s) => s.key)).toEqual([null, `follow-up-${seq}`, `follow-up-${seq}`]);
    expect(again.created).toBe(false);
    expect(again.runId).not.toBe(first.runId);
    expect(again.previousRunId).toBe(first.runId);
    const view = await client.getRun(again.runId);
    expect(view.runId).toBe(again.runId);
    expect(view.previousRunId).toBe(first.runId);
    // Only the unanswered call made the follow-up: the retry named the same request.
    const listed = [];
    for await (const r of client.searchRuns({ tenant: 'acme', limit: 1 })) listed.push(r);
    expect(listed.filter((r) => r.runId === again.runId)).toHaveLength(1);
  });

  it('lists and searches with the API filters, page after page', async () => {
    const client = new FleetClient({ url: api.url, token: PRODUCER_TOKEN });
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await client.createRun({ ...body(), tenant: 'beta' })).runId);
    for (const id of ids) await h.waitForStatus(id, ['completed']);
    const page = await client.listRuns({ tenant: 'beta', status: 'completed', limit: 2, since: new Date(0) });
    expect(page.runs).toHaveLength(2);
    expect(page.nextCursor).toBeDefined();
    const all = [];
    for await (const r of client.searchRuns({ tenant: 'beta', agent: 'support', limit: 2 })) all.push(r.runId);
    expect(all.sort()).toEqual([...ids].sort());
    const none = await client.listRuns({ tenant: 'beta', until: 1 });
    expect(none.runs).toEqual([]);
  });

  it('refusals are typed: not found, invalid with fields, unauthorized with or without a token, conflict', async () => {
    const producer = new FleetClient({ url: api.url, token: PRODUCER_TOKEN });
    await expect(producer.getRun('r_000000000000000000000000')).rejects.toBeInstanceOf(RunNotFound);
    const invalid = await producer.createRun({ tenant: 'acme' }).catch((e: unknown) => e);
    expect(invalid).toBeInstanceOf(InvalidRequest);
    expect((invalid as InvalidRequest).fields.map((f) => f.path)).toContain('agent');
    const none = await new FleetClient({ url: api.url }).getRun('r_000000000000000000000000').catch((e) => e);
    expect(none).toBeInstanceOf(Unauthorized);
    expect((none as Unauthorized).tokenSent).toBe(false);
    const bad = await new FleetClient({ url: api.url, token: 'nope' }).listRuns().catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(Unauthorized);
    expect((bad as Unauthorized).tokenSent).toBe(true);

    const operator = new FleetClient({ url: api.url, token: OPERATOR_TOKEN });
    const { runId } = await producer.createRun(body());
    await h.waitForStatus(runId, ['completed']);
    const conflict = await operator.cancelRun(runId).catch((e: unknown) => e);
    expect(conflict).toBeInstanceOf(Conflict);
    expect((conflict as Conflict).code).toBe('run_finished');
  });

  it('follows a run past an end an operator retried it from, to its new end; from its end, ends at once', async () => {
    const producer = new FleetClient({ url: api.url, token: PRODUCER_TOKEN });
    const operator = new FleetClient({ url: api.url, token: OPERATOR_TOKEN });
    const { runId } = await producer.createRun({ ...body([read, final]), budget: { maxSteps: 1 } });
    expect(await h.waitForStatus(runId, ['budget_exceeded'])).toBe('budget_exceeded');
    const first: RunEventMessage[] = [];
    for await (const e of producer.followEvents(runId)) first.push(e);
    expect(first.at(-1)).toMatchObject({ type: 'status_changed', data: { status: 'budget_exceeded' } });
    // From the ending event: nothing after it, and the iterator ends without waiting for a keep-alive.
    const afterEnd: RunEventMessage[] = [];
    const t0 = Date.now();
    for await (const e of producer.followEvents(runId, { after: first.at(-1)!.id })) afterEnd.push(e);
    expect(afterEnd).toEqual([]);
    expect(Date.now() - t0).toBeLessThan(8000); // not the next keep-alive: the API sends one every 10 s

    await operator.retryRun(runId, { steps: 5 });
    await h.waitForStatus(runId, ['completed']);
    const again: RunEventMessage[] = [];
    for await (const e of producer.followEvents(runId)) again.push(e);
    expect(again.map((e) => e.id)).toEqual((await readRunEvents(h.ctx, runId)).map((e) => e.id));
    expect(again.map((e) => e.type)).toContain('run_retried');
    expect(again.at(-1)).toMatchObject({ type: 'status_changed', data: { status: 'completed' } });
  }, 60_000);

  it('follows a run across an API restart: every event once, in order', async () => {
    const producer = new FleetClient({ url: api.url, token: PRODUCER_TOKEN });
    const { runId } = await producer.createRun(body([turn([refundCall(20_000)]), final]));
    const seen: RunEventMessage[] = [];
    const following = (async () => {
      for await (const e of producer.followEvents(runId)) seen.push(e);
    })();
    await until('the run waits for approval', 30_000, () =>
      seen.some((e) => e.type === 'status_changed' && e.data.status === 'waiting_approval'),
    );
    // The followed API dies; the run goes on (approved through another API) while no one is connected.
    const port = new URL(api.url).port;
    api.child.kill('SIGKILL');
    await api.exited;
    const other = await h.startApi();
    const operator = new FleetClient({ url: other.url, token: OPERATOR_TOKEN });
    const { approvals } = (await operator.listApprovals()) as {
      approvals: { runId: string; actionId: string; fingerprint: string }[];
    };
    const pending = approvals.find((a) => a.runId === runId)!;
    await operator.approve(pending.actionId, pending.fingerprint);
    await h.waitForStatus(runId, ['completed']);
    const seenWhileDown = seen.length;
    api = await spawnApi({ ...h.env, PORT: port });
    procs.push(api);
    await following;
    expect(seen.length).toBeGreaterThan(seenWhileDown);
    const stored = (await readRunEvents(h.ctx, runId)).map((e) => e.id);
    expect(seen.map((e) => e.id)).toEqual(stored);
    expect(seen.at(-1)).toMatchObject({ type: 'status_changed', data: { status: 'completed' } });
  }, 120_000);
});
