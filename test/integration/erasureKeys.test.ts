/**
 * The keys a client or an agent made of the customer's data, which an erasure (POST /v1/erasures, over the real API
 * on real Redis and PostgreSQL) replaces in Redis and in the archive: the run's intake event (the client's
 * Idempotency-Key, kept in the spec and shown in the run view), and the event key a run that ended parked still
 * names in its `wait` (that it waited, and on what kind of wait, stay).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { producerAuth, type Harness } from '../../testkit/harness.js';
import { defineAgent, defineWaitTool } from '../../src/index.js';
import type { EngineContext } from '../../src/runs/engineContext.js';
import type { Archiver } from '../../src/archive/archiver.js';
import { stopRun } from '../../src/runs/stop.js';
import { ERASED } from '../../src/archive/redact.js';
import { until } from '../../testkit/until.js';
import { erasureStack, operatorAuth } from '../support/erasureStack.js';

const usage = { promptTokens: 5, completionTokens: 5 };

const crm = defineAgent<{ id: string; note: string }>({
  name: 'crm',
  version: 'crm@1',
  input: z.object({ id: z.string(), note: z.string() }).strict(),
  key: (i) => i.id,
  instructions: () => 'Note it.',
  tools: [],
});

/** Waits for the customer's reply on a key made of their email (ToolContext.input). */
const replies = defineAgent<{ id: string; email: string }>({
  name: 'replies',
  version: 'replies@1',
  input: z.object({ id: z.string(), email: z.string() }).strict(),
  key: (i) => i.id,
  instructions: () => 'Wait for the reply.',
  tools: [
    defineWaitTool({
      name: 'wait_for_reply',
      description: "waits for the customer's reply",
      args: z.object({}).strict(),
      wait: (_a, tc) => ({ kind: 'event', key: `reply:${(tc.input as { email: string }).email}`, timeoutMs: 3600_000 }),
    }),
  ],
});

const stack = erasureStack('erasure-keys', [crm, replies]);
const { post, erase, hitsInRedis, hitsInArchive } = stack;
let h: Harness;
let ctx: EngineContext;
let archiver: Archiver;
beforeAll(async () => {
  ({ h, ctx, archiver } = await stack.start());
}, 60_000);
afterAll(() => stack.close());

const tag = () => randomBytes(5).toString('hex');

/** A crm run on `id` through POST /v1/runs (as a producer, with `headers`), its model answering at once. */
const postCrm = (id: string, headers: Record<string, string> = {}) =>
  post(
    '/v1/runs',
    { tenant: 'acme', agent: 'crm', input: { id, note: 'hello' }, model: 'scripted', script: [{ final: 'ok', usage }] },
    { ...headers, ...producerAuth },
  );

describe('an erasure replaces the keys made of the customer', () => {
  it("replaces the run's intake event (its Idempotency-Key) in the spec and the archived view", async () => {
    const id = `C-${tag()}`;
    // A client that makes its Idempotency-Key of the customer's email.
    const idempotencyKey = `signup:jo-${tag()}@example.com`;
    const created = await postCrm(id, { 'idempotency-key': idempotencyKey });
    expect(created.status).toBe(201);
    const runId = created.body.runId as string;
    expect(await h.waitForStatus(runId, ['completed'])).toBe('completed');
    await archiver.archiveOne(runId, ctx.keys.archiveQueue(ctx.keys.shardOf(runId)));
    expect(await hitsInRedis(idempotencyKey)).toEqual([ctx.keys.run(runId).run]);
    expect(await hitsInArchive(idempotencyKey)).not.toEqual([]);

    const res = await erase(id);
    expect(res.status).toBe(201);
    expect(res.body.runIds).toEqual([runId]);
    expect(await hitsInRedis(idempotencyKey)).toEqual([]);
    expect(await hitsInArchive(idempotencyKey)).toEqual([]);
    expect((await ctx.store.readSpec(runId))?.event).toBe('[erased]');
    // The same request again is still the same run: its id is derived from the key, not read from the spec.
    const again = await postCrm(id, { 'idempotency-key': idempotencyKey });
    expect(again.body.runId).toBe(runId);
  });

  it('replaces the event key a run that ended parked names in its wait, in Redis and in the archived record', async () => {
    const id = `T-${tag()}`;
    const email = `jo-${tag()}@example.com`;
    const key = `reply:${email}`;
    const script = [
      { toolCalls: [{ name: 'wait_for_reply', args: {} }], usage },
      { final: 'replied', usage },
    ];
    const created = await post(
      '/v1/runs',
      { tenant: 'acme', agent: 'replies', input: { id, email }, model: 'scripted', script },
      { 'idempotency-key': `replies-${tag()}`, ...producerAuth },
    );
    expect(created.status).toBe(201);
    const runId = created.body.runId as string;
    await until(`${runId} parked on its key`, 10_000, async () => {
      const wait = await ctx.redis.hget(ctx.keys.run(runId).run, 'wait');
      return wait !== null && (JSON.parse(wait) as { key?: string }).key === key;
    });
    // Cancelled while parked: the run ends with its wait still recorded.
    await stopRun(ctx, runId, { expected: ['waiting_event'], status: 'cancelled', reason: 'test', now: Date.now() });
    expect(await h.waitForStatus(runId, ['cancelled'])).toBe('cancelled');
    await archiver.archiveOne(runId, ctx.keys.archiveQueue(ctx.keys.shardOf(runId)));
    expect(await hitsInRedis(email)).not.toEqual([]);
    expect(await hitsInArchive(email)).not.toEqual([]);

    const res = await erase(id);
    expect(res.status).toBe(201);
    expect(res.body.runIds).toEqual([runId]);
    expect(await hitsInRedis(email)).toEqual([]);
    expect(await hitsInArchive(email)).toEqual([]);
    const wait = JSON.parse((await ctx.redis.hget(ctx.keys.run(runId).run, 'wait'))!) as Record<string, unknown>;
    expect(wait).toMatchObject({ kind: 'event', key: ERASED, step: 1, tool: 'wait_for_reply' });
    const archived = await ctx.archive!.pool.query<{ wait: string }>(
      "SELECT record ->> 'wait' AS wait FROM archived_runs WHERE run_id = $1",
      [runId],
    );
    expect(JSON.parse(archived.rows[0]!.wait)).toMatchObject({ kind: 'event', key: ERASED, tool: 'wait_for_reply' });
  });

  it('a command of its transaction that Redis refuses is a 500, counted failed, never a 201; asking again finishes it', async () => {
    const id = `C-${tag()}`;
    const created = await postCrm(id);
    const runId = created.body.runId as string;
    expect(await h.waitForStatus(runId, ['completed'])).toBe('completed');
    // The run names a search index Redis holds as another type: the erasure's index script fails inside its EXEC,
    // after the commands before it ran.
    const bad = `${h.env.KEY_PREFIX}not-an-index-${tag()}`;
    await ctx.redis.set(bad, 'x');
    await ctx.redis.hset(ctx.keys.run(runId).run, 'searchKeys', JSON.stringify([bad]));
    const failed = () => ctx.metrics.erasures.get().then((m) => m.values.find((v) => v.labels.outcome === 'failed'));
    const before = (await failed())?.value ?? 0;

    const refused = await erase(id);
    expect(refused.status).toBe(500);
    expect((await failed())?.value).toBe(before + 1);

    await ctx.redis.del(bad);
    const again = await erase(id);
    expect(again.status).toBe(201);
    expect(again.body.runIds).toEqual([runId]);
    expect(await ctx.redis.hget(ctx.keys.run(runId).run, 'searchKeys')).toBeNull();
  });

  it('a tenant out of the tenant format is a 400 naming it, nothing read', async () => {
    const res = await post('/v1/erasures', { tenant: 'acme corp', subject: 'x' }, operatorAuth);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: 'invalid_request', fields: [{ path: 'tenant' }] });
  });
});
