/**
 * A kill loop over support runs that do more, in real processes: an API process (runs in by POST /v1/runs,
 * replies in by the signed tickets webhook), worker processes SIGKILLed and replaced every ~2 s, and the run
 * store's own redis-server (AOF always, in a temp dir) SIGKILLed and restarted once during the loop. Each run
 * reads the customer and the knowledge base at once, opens a ticket and emails the customer at once (parallel
 * writes), hands two refunds to a refunds agent in one turn (two child runs at once, each refunding at Stripe and
 * emailing the customer at once; the parent waits for both), emails a question and waits for the reply on its ticket, sleeps 2 s, and answers. The processes load
 * test/fixtures/killLoopAgents.ts (the support agent with the hand-off, and the refunds agent).
 *
 * Checked afterwards, from the vendor stand-ins' own counts and from Redis: 0 duplicate effects at the services
 * (and exactly the effects the runs asked for, the children's included), every run and every child completed,
 * exactly one child per hand-off, listed on its parent, and no other child anywhere (none orphaned), each child's
 * answer taken by its parent once in the order asked and the children's spend charged once, every reply delivered (202 resumed) taken by its run
 * exactly once (one wait observation carrying it, its key consumed), every sleep woken once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ObservationEntry } from '../../src/core/journal.js';
import { Reconciler } from '../../src/ledger/reconciler.js';
import { sign } from '../../src/producer/webhookSignature.js';
import { replyKey } from '../../src/agents/support/tools/waitForReply.js';
import { createHarness, producerAuth, type Harness } from '../../testkit/harness.js';
import { startEmbeddedRedis, type EmbeddedRedis } from '../../testkit/embeddedRedis.js';
import { until } from '../../testkit/until.js';
import {
  killSpawned,
  spawnApi,
  spawnWorker,
  type SpawnedProcess,
  type WorkerProcess,
} from '../../testkit/processes.js';
import { readRunEvents } from '../../testkit/runEvents.js';

const SECRET = 'kill-loop-webhook-secret';
const RUNS = 8;
const CHAOS_MS = 24_000;
const KILL_EVERY_MS = 2000;
const ENDED = ['completed', 'failed', 'needs_human', 'budget_exceeded', 'cancelled'];
const usage = { promptTokens: 20, completionTokens: 5 };

let redis: EmbeddedRedis;
let h: Harness;
let api: SpawnedProcess & { url: string };
let reconciler: Reconciler;
const workers = new Set<WorkerProcess>();

beforeAll(async () => {
  redis = await startEmbeddedRedis({ appendfsync: 'always' });
  h = await createHarness('kill-loop', {
    REDIS_URL: redis.url,
    AGENTS_MODULE: 'test/fixtures/killLoopAgents.ts',
    WEBHOOK_SECRETS: JSON.stringify({ acme: SECRET }),
    STUCK_RUN_MIN_AGE_MS: '500',
    RECONCILE_POLL_MS: '100',
    RECONCILER_SWEEP_MS: '500',
  });
  api = await spawnApi(h.env);
  reconciler = new Reconciler(h.ctx, 'reconciler:kill-loop');
  reconciler.start();
}, 120_000);
afterAll(async () => {
  await reconciler?.stop();
  // Replacements still starting too: none is left serving the Redis stopped below.
  await killSpawned();
  await h?.close();
  await redis?.stop();
});

const ticketOf = (i: number, body = 'My order arrived broken.') => ({
  id: `KL-${i}`,
  subject: 'My order',
  body,
  customer: { email: `c${i}@example.com`, name: `Customer ${i}` },
});

const orderOf = (i: number, n: number) => `pi_KL_${i}_${n}`;
/** A scripted turn's tokens: the parent's six turns, and its two children's two each, charged to it once. */
const TURN_TOKENS = usage.promptTokens + usage.completionTokens;
const PARENT_TURNS = 6;
const CHILDREN = 2;
const CHILD_TURNS = 2;

function scriptOf(i: number) {
  const t = ticketOf(i);
  const email = (template: string, body: string) => ({
    name: 'send_email',
    args: { to: t.customer.email, template, subject: 'Re: My order', body },
  });
  const turn = (toolCalls: unknown[]) => ({ toolCalls, usage });
  return [
    turn([
      { name: 'lookup_customer', args: { email: t.customer.email } },
      { name: 'search_kb', args: { query: 'broken order' } },
    ]),
    turn([
      {
        name: 'create_ticket',
        args: { subject: `Follow-up ${t.id}`, body: 'Broken on arrival', sourceTicketId: t.id },
      },
      email('ticket_acknowledged', 'We are on it.'),
    ]),
    // Two refunds handed off in one turn: two children at once, the parent waiting for both.
    turn(
      [0, 1].map((n) => ({
        name: 'hand_to_refunds',
        args: { orderId: orderOf(i, n), amountCents: 1000 + i, email: t.customer.email },
      })),
    ),
    turn([email('question', 'Which order number?'), { name: 'wait_for_reply', args: { hours: 120 / 3600 } }]),
    turn([{ name: 'check_back_later', args: { hours: 2 / 3600 } }]),
    { toolCalls: [], final: 'done', usage },
  ];
}

/** Starts run i; a 503 (the API's Redis reconnecting after the restart) is retried with the same key, as a producer does. */
async function startRun(i: number): Promise<string> {
  const body = { tenant: 'acme', agent: 'support', input: ticketOf(i), model: 'scripted', script: scriptOf(i) };
  for (let attempt = 0; ; attempt++) {
    const res = await fetch(`${api.url}/v1/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': `kill-loop-${i}`, ...producerAuth },
      body: JSON.stringify(body),
    });
    if (res.status === 503 && attempt < 100) {
      // The producer's pause before it retries a 503 (the store reconnecting), as the Retry-After asks.
      await new Promise((r) => setTimeout(r, 100));
      continue;
    }
    expect([200, 201]).toContain(res.status);
    return ((await res.json()) as { runId: string }).runId;
  }
}

/** The customer's reply on ticket i, by the signed webhook: its answer, or undefined when the API could not answer. */
async function reply(i: number): Promise<{ status: number; body: Record<string, unknown> } | undefined> {
  const raw = JSON.stringify({ v: 1, eventId: `reply-${i}`, ticket: ticketOf(i, `reply ${i}`) });
  const timestamp = new Date().toISOString();
  try {
    const res = await fetch(`${api.url}/webhooks/tickets/acme`, {
      method: 'POST',
      body: raw,
      headers: {
        'content-type': 'application/json',
        'x-zendesk-webhook-signature': sign(SECRET, timestamp, raw),
        'x-zendesk-webhook-signature-timestamp': timestamp,
      },
    });
    if (res.status >= 500) return undefined;
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  } catch {
    return undefined;
  }
}

let starting = 0;
async function addWorker(): Promise<void> {
  starting++;
  try {
    const w = await spawnWorker(h.env, { startTimeoutMs: 60_000 });
    workers.add(w);
    void w.exited.then(() => workers.delete(w));
  } finally {
    starting--;
  }
}

async function statusOf(runId: string): Promise<string | undefined> {
  try {
    return (await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')) ?? undefined;
  } catch {
    return undefined; // Redis is restarting
  }
}

/** Each parent's children, as listed on it. */
async function childrenOfAll(parents: string[]): Promise<Map<string, string[]>> {
  const listed = await Promise.all(parents.map((p) => h.ctx.redis.smembers(h.ctx.keys.run(p).children)));
  return new Map(parents.map((p, i) => [p, listed[i]!]));
}

/** Every run of `agent` in the run index, however it was started. */
async function runsOf(agent: string): Promise<string[]> {
  const { redis, keys } = h.ctx;
  const ids = (await Promise.all(keys.allShards().map((s) => redis.zrange(keys.runIndex(s), 0, -1)))).flat();
  const agents = await Promise.all(ids.map((id) => redis.hget(keys.run(id).run, 'agent')));
  return ids.filter((_, i) => agents[i] === agent);
}

describe('support runs that do more under a kill loop', () => {
  it('0 duplicate effects at the services, every run and child completed, no child orphaned, every reply taken once', async () => {
    const started = Date.now();
    await Promise.all([addWorker(), addWorker()]);
    const runIds: string[] = [];
    const answers = new Map<number, { status: number; body: Record<string, unknown> }>();
    let redisDown = false;
    let done = false;

    // The customers: each replies once its run waits, not while the test restarts Redis: a webhook whose event
    // record was written just before Redis died, and whose delivery then failed, is answered `duplicate` on the
    // sender's retry (the record's delete failed too), a gap of the webhook's event record, for run starts as well.
    const customers = (async () => {
      while (!done) {
        for (let i = 0; i < runIds.length; i++) {
          if (answers.has(i) || redisDown || (await statusOf(runIds[i]!)) !== 'waiting_event') continue;
          const a = await reply(i);
          if (a) answers.set(i, a);
        }
        // The customers' pace: they look again every 50 ms, as long as the loop runs.
        await new Promise((r) => setTimeout(r, 50));
      }
    })();

    let kills = 0;
    let restarts = 0;
    const chaosEnd = Date.now() + CHAOS_MS;
    const restartAt = Date.now() + CHAOS_MS / 2;
    // Kills land once replacements have booted (seconds each on a loaded machine): the loop goes on past its time
    // until it has made its four kills, within the same time again.
    while (Date.now() < chaosEnd || (kills < 4 && Date.now() < chaosEnd + CHAOS_MS)) {
      // Runs start through the loop, so kills land on runs at every stage.
      if (runIds.length < RUNS) runIds.push(await startRun(runIds.length));
      await new Promise((r) => setTimeout(r, KILL_EVERY_MS)); // the kill loop's pace: the behaviour under test
      const victim = [...workers][Math.floor(Math.random() * workers.size)];
      if (victim) {
        victim.child.kill('SIGKILL');
        await victim.exited;
        kills++;
      }
      if (restarts === 0 && Date.now() >= restartAt) {
        redisDown = true;
        await redis.kill('SIGKILL');
        await redis.restart();
        redisDown = false;
        restarts++;
      }
      // Replacements boot in the background (a tsx process takes seconds on a loaded machine): kills go on.
      for (let n = workers.size + starting; n < 2; n++) void addWorker();
    }
    while (runIds.length < RUNS) runIds.push(await startRun(runIds.length));
    await until('a worker up', 60_000, () => workers.size > 0, 100);

    // Drain: the workers stay; every run must end.
    const deadline = Date.now() + 60_000;
    const statuses: string[] = [];
    for (const runId of runIds) {
      const ended = async () => ENDED.includes((await statusOf(runId)) ?? '');
      await until(`run ${runId} ended`, deadline - Date.now(), ended, 100).catch(() => {});
      statuses.push((await statusOf(runId)) ?? 'missing');
    }
    done = true;
    await customers;

    expect(kills).toBeGreaterThanOrEqual(4);
    expect(restarts).toBe(1);
    expect(statuses).toEqual(runIds.map(() => 'completed'));
    const counts = h.sandbox.counts();
    // The figure docs/agents-that-do-more.md quotes ("Under kills").
    const children = await childrenOfAll(runIds);
    console.info(
      `kill loop: ${RUNS} runs, ${[...children.values()].flat().length} children, ${kills} worker SIGKILLs, ` +
        `${restarts} Redis SIGKILL+restart, ${counts.byResource.tickets.records} tickets, ` +
        `${counts.byResource.emails.records} emails, ${counts.byResource.refunds.records} refunds, ` +
        `${counts.duplicates} duplicates, ${((Date.now() - started) / 1000).toFixed(1)} s`,
    );
    expect(counts.duplicates).toBe(0);
    expect(counts.duplicateKeys).toEqual([]);
    expect(counts.byResource.tickets.records).toBe(RUNS);
    // The acknowledgement and the question, and each child's refund confirmation.
    expect(counts.byResource.emails.records).toBe((2 + CHILDREN) * RUNS);
    expect(counts.byResource.refunds.records).toBe(CHILDREN * RUNS);
    // No child orphaned: every refunds run there is was started by a hand-off and is listed on its parent.
    expect((await runsOf('refunds')).sort()).toEqual([...children.values()].flat().sort());
    for (let i = 0; i < RUNS; i++) {
      const runId = runIds[i]!;
      expect(answers.get(i)).toEqual({
        status: 202,
        body: { runId, created: false, duplicate: false, resumed: true },
      });
      const obs = (await h.ctx.store.transcript(runId)).filter((e): e is ObservationEntry => e.kind === 'observation');
      const waited = obs.filter((o) => o.tool === 'wait_for_reply').map((o) => o.output);
      expect(waited).toEqual([{ event: { message: `reply ${i}` } }]);
      expect(obs.filter((o) => o.tool === 'check_back_later')).toHaveLength(1);
      expect(await h.ctx.redis.hget(h.ctx.keys.eventKey('acme', 'support', replyKey(`KL-${i}`)), 'state')).toBe(
        'consumed',
      );
      const events = await readRunEvents(h.ctx, runId);
      const woke = events.filter((e) => e.type === 'woke').map((e) => JSON.parse(e.data) as { kind: string });
      expect(woke.map((w) => w.kind).sort()).toEqual(['child', 'event', 'sleep']);
      // One child per hand-off, completed, its answer taken once in the order asked, the spend charged once.
      const handedOff = obs.filter((o) => o.tool === 'hand_to_refunds').map((o) => o.output as { childRunId: string });
      expect(handedOff.map((o) => o.childRunId).sort()).toEqual([...children.get(runId)!].sort());
      expect(handedOff).toEqual(
        [0, 1].map((n) => ({ childRunId: handedOff[n]!.childRunId, answer: `refunded ${orderOf(i, n)}` })),
      );
      for (const { childRunId } of handedOff) {
        expect(await statusOf(childRunId)).toBe('completed');
        expect((await h.ctx.store.readSpec(childRunId))?.parent?.runId).toBe(runId);
      }
      const used = (await h.ctx.store.readState(runId))!.used;
      expect(used.tokens).toBe((PARENT_TURNS + CHILDREN * CHILD_TURNS) * TURN_TOKENS);
    }
  }, 180_000);
});
