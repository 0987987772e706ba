/**
 * What an erasure (POST /v1/erasures, over the real API on real Redis and PostgreSQL) reaches beyond the runs its
 * subject names: the child runs their agent tools started, whose input is the parent's text under a subject key of
 * their own (the ticket's words handed on as a refund's reason, keyed by the order), in Redis and in the archive
 * alone; a child still at work refuses the erasure, named, even when its parent has ended. The follow-ups of the runs
 * a field value finds, whose previous conversation is their text (the ticket's next message, from another address),
 * in Redis and in the archive alone; a follow-up at work refuses the erasure. And the payloads of the
 * events its runs' waits took, kept on their keys after the wait (until its due time plus EVENT_KEEP_MS), and a
 * delivery kept on such a key since; a delivery on a key no erased run waited on is not found (and only expires).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';
import { producerAuth, type Harness } from '../../testkit/harness.js';
import { until } from '../../testkit/until.js';
import { defineAgent, defineAgentTool, defineWaitTool } from '../../src/index.js';
import type { EngineContext } from '../../src/runs/engineContext.js';
import type { Archiver } from '../../src/archive/archiver.js';
import { childRunsOf } from '../../src/runs/children.js';
import { stopRun } from '../../src/runs/stop.js';
import { erasureStack, operatorAuth } from '../support/erasureStack.js';

const RETENTION_MS = 1500;
const ENDED = ['completed', 'failed', 'budget_exceeded', 'cancelled', 'needs_human'];
const usage = { promptTokens: 50, completionTokens: 10 };

const refundInput = z.object({ order: z.string(), reason: z.string(), mode: z.enum(['answer', 'nap']) }).strict();
type RefundInput = z.infer<typeof refundInput>;

/** The child: keyed by its order, its reason the customer's words; it answers with them, or naps a minute first. */
const refunds = defineAgent<RefundInput>({
  name: 'refunds',
  version: 'refunds@1',
  input: refundInput,
  key: (i) => i.order,
  instructions: () => 'Decide the refund.',
  prompt: (i) => `Refund on ${i.order}: ${i.reason}`,
  tools: [
    defineWaitTool({
      name: 'nap',
      description: 'sleeps a minute',
      args: z.object({}),
      wait: () => ({ kind: 'sleep', forMs: 60_000 }),
    }),
  ],
  demoScript: ({ reason, mode }): unknown[] => [
    ...(mode === 'nap' ? [{ toolCalls: [{ name: 'nap', args: {} }], usage }] : []),
    { final: `refunded, as asked: ${reason}`, usage },
  ],
});

/** The parent: keyed by its ticket; its agent tool hands the ticket's text to a refunds run. */
const desk = defineAgent<{ ticket: string; text: string }>({
  name: 'desk',
  version: 'desk@1',
  input: z.object({ ticket: z.string(), text: z.string() }).strict(),
  key: (i) => i.ticket,
  instructions: () => 'Hand refunds on.',
  tools: [
    defineAgentTool({
      name: 'hand_to_refunds',
      description: 'hands a refund to the refunds agent',
      args: refundInput,
      agent: 'refunds',
      input: (a) => a,
    }),
  ],
});

const topics = z.enum(['early', 'reply', 'late']);

/** Waits for an event on `<topic>:<order>`, the order read from the run's input (ToolContext.input). */
const orders = defineAgent<{ order: string }>({
  name: 'orders',
  version: 'orders@1',
  input: z.object({ order: z.string() }).strict(),
  key: (i) => i.order,
  instructions: () => 'Follow the order.',
  tools: [
    defineWaitTool({
      name: 'wait_for',
      description: 'waits for an event on the order',
      args: z.object({ topic: topics }).strict(),
      wait: ({ topic }, tc) => ({
        kind: 'event',
        key: `${topic}:${(tc.input as { order: string }).order}`,
        timeoutMs: 3600_000,
      }),
    }),
  ],
});

const crmInput = z.object({ ticket: z.string(), email: z.string(), note: z.string() }).strict();

/** One message of a ticket, searched by its sender's address (Agent.search); a later message is a follow-up. */
const crm = defineAgent<z.infer<typeof crmInput>>({
  name: 'crm',
  version: 'crm@1',
  input: crmInput,
  key: (i) => i.ticket,
  search: (i) => ({ email: i.email }),
  instructions: () => 'Note the message.',
  tools: [
    defineWaitTool({
      name: 'nap',
      description: 'sleeps a minute',
      args: z.object({}),
      wait: () => ({ kind: 'sleep', forMs: 60_000 }),
    }),
  ],
});

const stack = erasureStack('erasure-reach', [desk, refunds, orders, crm], {
  RUN_RETENTION_MS: String(RETENTION_MS),
  COMPLETION_TOKEN_CAP: '100',
  MODEL_MAX_ATTEMPTS: '1',
});
const { post, erase, hitsInRedis, hitsInArchive } = stack;
let h: Harness;
let ctx: EngineContext;
let url: string;
let archiver: Archiver;
beforeAll(async () => {
  ({ h, ctx, url, archiver } = await stack.start());
}, 60_000);
afterAll(() => stack.close());

/** A desk run on `ticket` whose model hands `text` on to a refunds run on `order` (which answers, or naps first). */
async function startDesk(ticket: string, order: string, text: string, mode: RefundInput['mode']): Promise<string> {
  const script = [
    { toolCalls: [{ name: 'hand_to_refunds', args: { order, reason: text, mode } }], usage },
    { final: 'handed on', usage },
  ];
  const res = await post(
    '/v1/runs',
    { tenant: 'acme', agent: 'desk', input: { ticket, text }, model: 'scripted', script },
    { 'idempotency-key': `desk-${ticket}`, ...producerAuth },
  );
  expect(res.status).toBe(201);
  return res.body.runId as string;
}

async function onlyChild(runId: string): Promise<string> {
  const ids = await until(`a child of ${runId}`, 10_000, async () => {
    const ids = await childRunsOf(ctx).childrenOf(runId);
    return ids.length > 0 && ids;
  });
  expect(ids).toHaveLength(1);
  return ids[0]!;
}

/**
 * The run as its readers serve it (view, spec and, once it ended, its events: the stream of a run at work stays
 * open), from Redis or the archive, as one text.
 */
async function served(runId: string, ended = true): Promise<string> {
  const view = await fetch(`${url}/v1/runs/${runId}`, { headers: producerAuth });
  expect(view.status).toBe(200);
  const spec = JSON.stringify(await ctx.store.readSpec(runId));
  if (!ended) return `${await view.text()}\n${spec}`;
  const events = await fetch(`${url}/v1/runs/${runId}/events`, { headers: producerAuth });
  return `${await view.text()}\n${await events.text()}\n${spec}`;
}

const tag = () => randomBytes(5).toString('hex');

describe("an erasure reaches the child runs of the subject's runs", () => {
  it("erases a child whose input is the parent's text, in Redis: neither run holds it any more", async () => {
    const mark = `CHILD-ME-${tag()}`;
    const ticket = `T-${tag()}`;
    const parent = await startDesk(ticket, `O-${tag()}`, `my card was charged twice ${mark}`, 'answer');
    expect(await h.waitForStatus(parent, ENDED)).toBe('completed');
    const child = await onlyChild(parent);
    expect(await h.waitForStatus(child, ENDED)).toBe('completed');
    // The child's input, journal and answer hold the text; its subject key (the order) does not.
    expect(await served(child)).toContain(mark);
    expect((await ctx.store.readSpec(child))!.key).not.toContain(mark);
    const before = await hitsInRedis(mark);
    expect(before).toContain(ctx.keys.run(child).run);
    // The parent's hand-off record: a digest of the tool's arguments (the text among them) -> the child.
    expect(Object.values(await ctx.redis.hgetall(ctx.keys.run(parent).handoffs))).toEqual([child]);

    const res = await erase(ticket);
    expect(res.status).toBe(201);
    expect(res.body.runIds).toEqual([parent, child].sort());
    expect(await hitsInRedis(mark)).toEqual([]);
    expect(await ctx.redis.exists(ctx.keys.run(parent).handoffs)).toBe(0);
    for (const runId of [parent, child]) expect(await served(runId)).not.toContain(mark);
    // Their copies, taken after the erasure, carry the marker.
    await archiver.pass();
    expect(await hitsInArchive(mark)).toEqual([]);
  });

  it('erases a child that only the archive holds, found by its parent row', async () => {
    const mark = `ARCHIVED-CHILD-${tag()}`;
    const ticket = `T-${tag()}`;
    const parent = await startDesk(ticket, `O-${tag()}`, `refund me ${mark}`, 'answer');
    expect(await h.waitForStatus(parent, ENDED)).toBe('completed');
    const child = await onlyChild(parent);
    expect(await h.waitForStatus(child, ENDED)).toBe('completed');
    for (const runId of [parent, child])
      await archiver.archiveOne(runId, ctx.keys.archiveQueue(ctx.keys.shardOf(runId)));
    // Redis lets both runs go at the retention; the parent's list of children (kept as long as its deadline could
    // run) goes too, as it will: only the archive's rows know the child.
    await until('the runs to leave Redis', RETENTION_MS + 10_000, async () => {
      const left = await ctx.redis.exists(ctx.keys.run(parent).run, ctx.keys.run(child).run);
      return left === 0;
    });
    await ctx.redis.del(ctx.keys.run(parent).children);
    const row = await ctx.archive!.pool.query('SELECT child_run_ids FROM archived_runs WHERE run_id = $1', [parent]);
    expect(row.rows[0]).toEqual({ child_run_ids: [child] });
    expect(await hitsInArchive(mark)).not.toEqual([]);
    expect(await served(child)).toContain(mark);

    const res = await erase(ticket);
    expect(res.status).toBe(201);
    expect(res.body.runIds).toEqual([parent, child].sort());
    expect(await hitsInArchive(mark)).toEqual([]);
    for (const runId of [parent, child]) expect(await served(runId)).not.toContain(mark);
  });

  it('refuses, naming it, while a child is at work, even after its parent ended; erases both once it ended', async () => {
    const mark = `BUSY-CHILD-${tag()}`;
    const ticket = `T-${tag()}`;
    const parent = await startDesk(ticket, `O-${tag()}`, `please hurry ${mark}`, 'nap');
    const child = await onlyChild(parent);
    expect(await h.waitForStatus(child, ['sleeping'])).toBe('sleeping');
    expect(await h.waitForStatus(parent, ['waiting_child'])).toBe('waiting_child');
    // The parent ends as a process that died before the cascade would leave it: its child sleeps on.
    await stopRun(ctx, parent, { expected: ['waiting_child'], status: 'cancelled', reason: 'test', now: Date.now() });
    expect(await h.waitForStatus(parent, ENDED)).toBe('cancelled');
    const erasures = await ctx.redis.llen(ctx.keys.erasures());

    const refused = await erase(ticket);
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ error: 'runs_at_work', runIds: [child] });
    // Nothing written: no erasure recorded, the text where it was.
    expect(await ctx.redis.llen(ctx.keys.erasures())).toBe(erasures);
    expect(await served(parent)).toContain(mark);
    expect(await served(child, false)).toContain(mark);

    const cancel = await post(`/v1/runs/${child}/cancel`, {}, operatorAuth);
    expect(cancel.status).toBeLessThan(300);
    expect(await h.waitForStatus(child, ENDED)).toBe('cancelled');
    const res = await erase(ticket);
    expect(res.status).toBe(201);
    expect(res.body.runIds).toEqual([parent, child].sort());
    expect(await hitsInRedis(mark)).toEqual([]);
  });
});

describe("an erasure reaches the event payloads of its runs' waits", () => {
  /** A delivery of `payload` on the orders agent's `key` (POST /v1/events): `resumed` or `kept`. */
  async function deliver(key: string, payload: unknown): Promise<string> {
    const res = await post('/v1/events', { tenant: 'acme', agent: 'orders', key, payload }, producerAuth);
    expect(res.status).toBe(202);
    return res.body.outcome as string;
  }

  /** An orders run on `order` whose model waits on each of `waits` in turn, then answers. */
  async function startOrders(order: string, waits: readonly z.infer<typeof topics>[]): Promise<string> {
    const script = [
      ...waits.map((topic) => ({ toolCalls: [{ name: 'wait_for', args: { topic } }], usage })),
      { final: 'followed', usage },
    ];
    const created = await post(
      '/v1/runs',
      { tenant: 'acme', agent: 'orders', input: { order }, model: 'scripted', script },
      { 'idempotency-key': `orders-${order}`, ...producerAuth },
    );
    expect(created.status).toBe(201);
    return created.body.runId as string;
  }

  /** Until the run parks on a wait for `key`. */
  const parkedOn = (runId: string, key: string) =>
    until(`${runId} waiting on ${key}`, 10_000, async () => {
      const wait = await ctx.redis.hget(ctx.keys.run(runId).run, 'wait');
      return wait !== null && (JSON.parse(wait) as { key?: string }).key === key;
    });

  it("replaces the payloads its waits took and one kept on their key since; another key's delivery expires", async () => {
    const mark = `EVENT-ME-${tag()}`;
    const elsewhere = `ELSEWHERE-${tag()}`;
    const order = `O-${tag()}`;
    const hash = (topic: string) => ctx.keys.eventKey('acme', 'orders', `${topic}:${order}`);
    // Kept before the run waits: its first wait takes it at once, never parked.
    expect(await deliver(`early:${order}`, { note: `early ${mark}` })).toBe('kept');
    const runId = await startOrders(order, topics.options);
    // Parked, then given the reply (the run resumes and the wait consumes it).
    await parkedOn(runId, `reply:${order}`);
    expect(await deliver(`reply:${order}`, { note: `reply ${mark}` })).toBe('resumed');
    await parkedOn(runId, `late:${order}`);
    expect(await deliver(`late:${order}`, { note: `late ${mark}` })).toBe('resumed');
    expect(await h.waitForStatus(runId, ENDED)).toBe('completed');
    // The sender sends again after the wait took it: kept on the key (for a wait that never comes).
    expect(await deliver(`late:${order}`, { note: `again ${mark}` })).toBe('kept');
    // A key no run of the order ever waited on: nothing names it to the erasure.
    expect(await deliver(`other:${order}`, { note: elsewhere })).toBe('kept');
    expect(await ctx.redis.hmget(hash('early'), 'state', 'runId')).toEqual(['consumed', runId]);
    expect(await ctx.redis.hmget(hash('reply'), 'state', 'runId')).toEqual(['consumed', runId]);
    expect(await ctx.redis.hget(hash('late'), 'state')).toBe('pending');
    const before = await hitsInRedis(mark);
    for (const topic of topics.options) expect(before).toContain(hash(topic));

    const res = await erase(order);
    expect(res.status).toBe(201);
    expect(res.body.runIds).toEqual([runId]);
    expect(await hitsInRedis(mark)).toEqual([]);
    // The hashes keep their state, ids and expiry: only the payload is replaced.
    for (const topic of topics.options) {
      expect(await ctx.redis.hget(hash(topic), 'payload')).toBe('{"note":"[erased]"}');
      expect(await ctx.redis.pttl(hash(topic))).toBeGreaterThan(0);
    }
    expect(await ctx.redis.hmget(hash('reply'), 'state', 'runId')).toEqual(['consumed', runId]);
    // What the erasure cannot find is left to its expiry: EVENT_KEEP_MS at most.
    expect(await hitsInRedis(elsewhere)).toEqual([hash('other')]);
    const ttl = await ctx.redis.pttl(hash('other'));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(h.cfg.EVENT_KEEP_MS);
  });

  it('replaces the payload a wait took for a run that only the archive holds, its key read from the archived transcript', async () => {
    const mark = `ARCHIVED-EVENT-${tag()}`;
    const order = `O-${tag()}`;
    const hash = ctx.keys.eventKey('acme', 'orders', `reply:${order}`);
    const runId = await startOrders(order, ['reply']);
    await parkedOn(runId, `reply:${order}`);
    expect(await deliver(`reply:${order}`, { note: `reply ${mark}` })).toBe('resumed');
    expect(await h.waitForStatus(runId, ENDED)).toBe('completed');
    await archiver.archiveOne(runId, ctx.keys.archiveQueue(ctx.keys.shardOf(runId)));
    // Redis lets the run go at the retention; the key keeps the payload until the wait's due time plus EVENT_KEEP_MS.
    await until('the run to leave Redis', RETENTION_MS + 10_000, async () => {
      return (await ctx.redis.exists(ctx.keys.run(runId).run)) === 0;
    });
    expect(await hitsInRedis(mark)).toEqual([hash]);

    const res = await erase(order);
    expect(res.status).toBe(201);
    expect(res.body.runIds).toEqual([runId]);
    expect(await hitsInRedis(mark)).toEqual([]);
    expect(await hitsInArchive(mark)).toEqual([]);
    expect(await ctx.redis.hget(hash, 'payload')).toBe('{"note":"[erased]"}');
  });
});

const email = () => `jo-${tag()}@example.com`;

/** A crm run on `ticket` from `from`: it answers with the note, or naps a minute first. */
async function message(ticket: string, from: string, note: string, nap = false): Promise<string> {
  const script = [
    ...(nap ? [{ toolCalls: [{ name: 'nap', args: {} }], usage }] : []),
    { final: `noted: ${note}`, usage },
  ];
  const res = await post(
    '/v1/runs',
    { tenant: 'acme', agent: 'crm', input: { ticket, email: from, note }, model: 'scripted', script },
    { 'idempotency-key': `crm-${tag()}`, ...producerAuth },
  );
  expect(res.status).toBe(201);
  return res.body.runId as string;
}

const eraseField = (value: string) =>
  post('/v1/erasures', { tenant: 'acme', field: { name: 'email', value } }, operatorAuth);

describe('an erasure reaches the follow-ups of the runs a field value finds', () => {
  /** A ticket's first message from `first` (holding `mark`), ended, then its next from another address. */
  async function twoMessages(mark: string, first: string, nap = false): Promise<[string, string]> {
    const ticket = `T-${tag()}`;
    const earlier = await message(ticket, first, `my account number is ${mark}`);
    expect(await h.waitForStatus(earlier, ENDED)).toBe('completed');
    const later = await message(ticket, email(), 'any news?', nap);
    expect(await ctx.redis.hget(ctx.keys.run(later).run, 'previousRunId')).toBe(earlier);
    return [earlier, later];
  }

  it("erases the follow-up, whose previous conversation is the erased run's text, in Redis and its archive copy", async () => {
    const mark = `FOLLOW-ME-${tag()}`;
    const first = email();
    const [earlier, later] = await twoMessages(mark, first);
    expect(await h.waitForStatus(later, ENDED)).toBe('completed');
    // The follow-up's model was given the first message, address and text: its hash holds them.
    const context = await ctx.redis.hget(ctx.keys.run(later).run, 'followUpContext');
    expect(context).toContain(mark);
    expect(context).toContain(first);

    const res = await eraseField(first);
    expect(res.status).toBe(201);
    expect(res.body.runIds).toEqual([earlier, later].sort());
    expect(await hitsInRedis(mark)).toEqual([]);
    expect(await hitsInRedis(first)).toEqual([]);
    for (const runId of [earlier, later]) expect(await served(runId)).not.toContain(mark);
    await archiver.pass();
    expect(await hitsInArchive(mark)).toEqual([]);
    expect(await hitsInArchive(first)).toEqual([]);

    // The record keeps the address only salted: checkable by whoever holds it, not by its unsalted digest.
    const { valueSalt, valueSha256 } = res.body.field as { valueSalt: string; valueSha256: string };
    expect(valueSalt).toMatch(/^[0-9a-f]{32}$/);
    expect(valueSha256).toBe(
      createHash('sha256')
        .update(valueSalt + first)
        .digest('hex'),
    );
    const unsalted = createHash('sha256').update(first).digest('hex');
    const kept = await ctx.redis.lrange(ctx.keys.erasures(), 0, -1);
    expect(kept.find((r) => r.includes(res.body.erasureId as string))).toContain(valueSha256);
    expect(kept.join('\n')).not.toContain(unsalted);
    const row = await ctx.archive!.pool.query(
      'SELECT field_value_sha256, field_value_salt FROM erasures WHERE id = $1',
      [res.body.erasureId],
    );
    expect(row.rows).toEqual([{ field_value_sha256: valueSha256, field_value_salt: valueSalt }]);
    const again = await eraseField(first);
    expect(again.status).toBe(201);
    expect((again.body.field as { valueSha256: string }).valueSha256).not.toBe(valueSha256);
  });

  it('erases a follow-up that only the archive holds, found by its previous_run_id', async () => {
    const mark = `ARCHIVED-FOLLOW-${tag()}`;
    const first = email();
    const [earlier, later] = await twoMessages(mark, first);
    expect(await h.waitForStatus(later, ENDED)).toBe('completed');
    for (const runId of [earlier, later])
      await archiver.archiveOne(runId, ctx.keys.archiveQueue(ctx.keys.shardOf(runId)));
    await until('the runs to leave Redis', RETENTION_MS + 10_000, async () => {
      return (await ctx.redis.exists(ctx.keys.run(earlier).run, ctx.keys.run(later).run)) === 0;
    });
    // The earlier row as a copy made before the follow-up was created holds it: without the link.
    await ctx.archive!.pool.query('UPDATE archived_runs SET next_run_id = NULL WHERE run_id = $1', [earlier]);
    expect(await hitsInArchive(mark)).not.toEqual([]);

    const res = await eraseField(first);
    expect(res.status).toBe(201);
    expect(res.body.runIds).toEqual([earlier, later].sort());
    expect(await hitsInArchive(mark)).toEqual([]);
    expect(await hitsInArchive(first)).toEqual([]);
    for (const runId of [earlier, later]) expect(await served(runId)).not.toContain(mark);
  });

  it('refuses, naming it, while the follow-up is at work, its previous run only in the archive; erases both once it ended', async () => {
    const mark = `BUSY-FOLLOW-${tag()}`;
    const first = email();
    const [earlier, later] = await twoMessages(mark, first, true);
    expect(await h.waitForStatus(later, ['sleeping'])).toBe('sleeping');
    expect(await ctx.redis.hget(ctx.keys.run(later).run, 'followUpContext')).toContain(mark);
    await archiver.archiveOne(earlier, ctx.keys.archiveQueue(ctx.keys.shardOf(earlier)));
    await until('the earlier run to leave Redis', RETENTION_MS + 10_000, async () => {
      return (await ctx.redis.exists(ctx.keys.run(earlier).run)) === 0;
    });
    // Its row without the link (copied before the follow-up was created): only the follow-up's own hash names it.
    await ctx.archive!.pool.query('UPDATE archived_runs SET next_run_id = NULL WHERE run_id = $1', [earlier]);
    const erasures = await ctx.redis.llen(ctx.keys.erasures());

    const refused = await eraseField(first);
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ error: 'runs_at_work', runIds: [later] });
    expect(await ctx.redis.llen(ctx.keys.erasures())).toBe(erasures);

    const cancel = await post(`/v1/runs/${later}/cancel`, {}, operatorAuth);
    expect(cancel.status).toBeLessThan(300);
    expect(await h.waitForStatus(later, ENDED)).toBe('cancelled');
    const res = await eraseField(first);
    expect(res.status).toBe(201);
    expect(res.body.runIds).toEqual([earlier, later].sort());
    expect(await hitsInRedis(mark)).toEqual([]);
    await archiver.pass();
    expect(await hitsInArchive(mark)).toEqual([]);
  });
});

describe('an erasure by a field value reaches an ended run its archive has not copied yet', () => {
  /** The run's index of the crm search field `email` = `value` (tenant acme), on its shard. */
  const emailIndex = (runId: string, value: string) =>
    ctx.keys.searchIndex(ctx.keys.shardOf(runId), 'acme', 'email', value);
  const past = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  it("keeps the run's search index entries while it waits for its archive row; the commit gives them the retention", async () => {
    const from = email();
    const runId = await message(`T-${tag()}`, from, 'hello');
    expect(await h.waitForStatus(runId, ENDED)).toBe('completed');
    const index = emailIndex(runId, from);
    expect(await ctx.redis.pttl(ctx.keys.run(runId).run)).toBe(-1);
    expect(await ctx.redis.pttl(index)).toBe(-1);
    expect(await ctx.redis.get(`${index}:live`)).toBe('1');

    expect(await archiver.archiveOne(runId, ctx.keys.archiveQueue(ctx.keys.shardOf(runId)))).toBe('archived');
    const ttl = await ctx.redis.pttl(index);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(RETENTION_MS);
    expect(await ctx.redis.exists(`${index}:live`)).toBe(0);
  });

  it('finds it past the retention (the archiver lagging), erases it in Redis, and the archive copies the erased run', async () => {
    const mark = `UNARCHIVED-${tag()}`;
    const from = email();
    const runId = await message(`T-${tag()}`, from, `my pin is ${mark}`);
    expect(await h.waitForStatus(runId, ENDED)).toBe('completed');
    // The archiver does not run (PostgreSQL down, a copy failing) for longer than the retention.
    await past(RETENTION_MS + 1000);
    expect(await ctx.redis.zscore(emailIndex(runId, from), runId)).not.toBeNull();

    const res = await eraseField(from);
    expect(res.status).toBe(201);
    expect(res.body.runIds).toEqual([runId]);
    expect(await hitsInRedis(mark)).toEqual([]);
    expect(await hitsInRedis(from)).toEqual([]);
    // Out of its indexes, it is let go of them: the index expires, no count is left behind.
    const index = emailIndex(runId, from);
    expect(await ctx.redis.zscore(index, runId)).toBeNull();
    expect(await ctx.redis.exists(`${index}:live`)).toBe(0);

    expect(await archiver.archiveOne(runId, ctx.keys.archiveQueue(ctx.keys.shardOf(runId)))).toBe('archived');
    const row = await ctx.archive!.pool.query('SELECT erased_at_ms FROM archived_runs WHERE run_id = $1', [runId]);
    expect(row.rows).toHaveLength(1);
    expect(row.rows[0].erased_at_ms).not.toBeNull();
    expect(await hitsInArchive(mark)).toEqual([]);
    expect(await hitsInArchive(from)).toEqual([]);
  });
});
