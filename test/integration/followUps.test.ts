/**
 * Follow-up runs over real HTTP, a worker and the local OpenAI server: a later event on the
 * same subject (a new Idempotency-Key, a new webhook event id, a Zendesk comment) starts a new
 * run linked to the subject's latest run; the same event twice is one run, answered with the run
 * before it as the first answer named it; the follow-up's
 * model request carries the previous conversation, counted in the budget estimate; a
 * follow-up waits while its previous run is still at work; a bad event id is a 400 naming the
 * field, with nothing written.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, producerAuth, sampleTicket, type Harness } from '../../testkit/harness.js';
import { keysAddedSince, keySet } from '../../testkit/keyPrefix.js';
import { startOpenAIServer, type ModelServer } from '../../testkit/modelServers/openai.js';
import { postSigned } from '../support/webhooks.js';
import type { RunView } from '../../src/http/runView.js';
import { execFile } from 'node:child_process';
import { FOLLOW_UP_FIELD, followUpTokens } from '../../src/worker/followUp.js';
import { toolSchemaTokens } from '../../src/budget/policy.js';
import { until } from '../../testkit/until.js';
import { moduleArgs } from '../../testkit/spawnModule.js';

const SECRET = 'acme-webhook-secret';
const OPERATOR_TOKEN = 'operator-token-for-follow-up-tests';
const DONE = ['completed', 'failed', 'budget_exceeded', 'needs_human', 'cancelled'];
let h: Harness;
let url: string;
let openai: ModelServer;

beforeAll(async () => {
  openai = await startOpenAIServer();
  h = await createHarness('followups', {
    OPENAI_BASE_URL: `${openai.url}/v1`,
    OPENAI_API_KEY: 'sk-test',
    OPENAI_MODEL: 'gpt-4o-mini',
    WEBHOOK_SECRETS: JSON.stringify({ acme: SECRET }),
    WEBHOOK_TOLERANCE_S: '60',
    FOLLOW_UP_WAIT_MS: '100',
    OPERATOR_TOKEN,
  });
  await h.startWorker();
  url = (await h.startApi()).url;
});
afterAll(async () => {
  await h.close();
  await openai.close();
});

async function postRun(body: unknown, eventKey?: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}/v1/runs`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...producerAuth,
      ...(eventKey !== undefined ? { 'idempotency-key': eventKey } : {}),
    },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function view(runId: string): Promise<RunView> {
  const res = await fetch(`${url}/v1/runs/${runId}`, { headers: producerAuth });
  expect(res.status).toBe(200);
  return (await res.json()) as RunView;
}

const postWebhook = (path: string, body: unknown) => postSigned(`${url}${path}`, SECRET, body);

/**
 * The keys of this file's prefixes, counted once every ended run is compacted: a run's compaction follows its end
 * (it packs the journal, then folds each action's history and drops its reservation), so an earlier test's run may
 * still be losing keys when its status is read. An ended run is compacted once neither its journal list nor any of
 * its actions' history lists is left.
 */
/** Every key of this test's prefixes, for "nothing is written" (testkit/keyPrefix.ts). */
const keys = () => keySet(h.ctx.redis, h.cfg.KEY_PREFIX, h.cfg.BULL_PREFIX);
const keysAdded = (before: ReadonlySet<string>) =>
  keysAddedSince(h.ctx.redis, before, h.cfg.KEY_PREFIX, h.cfg.BULL_PREFIX);

/** The user messages of the model requests that carry `marker` (a ticket's text), in order. */
function requestsFor(marker: string): string[] {
  return openai.requests.map((r) => JSON.stringify(r.body.messages)).filter((m) => m.includes(marker));
}

const ticket = (id: string, body: string) => ({ ...sampleTicket(id), body });

describe('follow-up runs through POST /v1/runs', () => {
  it('two events on one subject are two linked runs; the same event twice is one run; the follow-up model sees the previous conversation', async () => {
    openai.enqueue({
      kind: 'turn',
      text: 'ANSWER-ONE: a replacement mug is on its way.',
      usage: { input: 100, output: 10 },
    });
    const first = await postRun(
      { tenant: 'acme', ticket: ticket('F-1', 'FIRST-MESSAGE the mug is broken'), agent: { model: 'openai' } },
      'evt-1',
    );
    expect(first.status).toBe(201);
    const firstId = first.body.runId as string;
    expect(first.body.previousRunId).toBeUndefined();
    expect(await h.waitForStatus(firstId, DONE)).toBe('completed');

    // The same event again (a retried POST): the same run, nothing new.
    const again = await postRun(
      { tenant: 'acme', ticket: ticket('F-1', 'FIRST-MESSAGE the mug is broken'), agent: { model: 'openai' } },
      'evt-1',
    );
    expect(again).toMatchObject({ status: 200, body: { runId: firstId, created: false } });

    openai.enqueue({ kind: 'turn', text: 'ANSWER-TWO: tracking number sent.', usage: { input: 150, output: 10 } });
    const second = await postRun(
      { tenant: 'acme', ticket: ticket('F-1', 'SECOND-MESSAGE where is my replacement?'), agent: { model: 'openai' } },
      'evt-2',
    );
    expect(second.status).toBe(201);
    const secondId = second.body.runId as string;
    expect(secondId).not.toBe(firstId);
    expect(second.body.previousRunId).toBe(firstId);
    expect(await h.waitForStatus(secondId, DONE)).toBe('completed');
    // The follow-up's event again (a retry whose answer was lost): the same run, named as the first answer named it.
    const secondAgain = await postRun(
      { tenant: 'acme', ticket: ticket('F-1', 'SECOND-MESSAGE where is my replacement?'), agent: { model: 'openai' } },
      'evt-2',
    );
    expect(secondAgain).toEqual({
      status: 200,
      body: { runId: secondId, created: false, previousRunId: firstId, status: 'completed' },
    });

    // The follow-up's first model request: the previous first message and final answer, then its own message.
    const sent = requestsFor('SECOND-MESSAGE');
    expect(sent.length).toBeGreaterThanOrEqual(1);
    expect(sent[0]).toContain('FIRST-MESSAGE the mug is broken');
    expect(sent[0]).toContain('ANSWER-ONE: a replacement mug is on its way.');
    expect(sent[0]!.indexOf('ANSWER-ONE')).toBeLessThan(sent[0]!.indexOf('SECOND-MESSAGE'));
    // The first run's requests never carried anything of the second.
    expect(
      requestsFor('FIRST-MESSAGE')
        .filter((m) => !m.includes('SECOND-MESSAGE'))
        .every((m) => !m.includes('ANSWER-TWO')),
    ).toBe(true);

    const [v1, v2] = await Promise.all([view(firstId), view(secondId)]);
    expect(v1).toMatchObject({ nextRunId: secondId, event: 'evt-1', key: 'F-1' });
    expect(v1.previousRunId).toBeUndefined();
    expect(v2).toMatchObject({ previousRunId: firstId, event: 'evt-2', key: 'F-1' });
    expect(v2.nextRunId).toBeUndefined();
    expect((await h.ctx.store.readSpec(secondId))?.previousRunId).toBe(firstId);
    // The offline replay (the CLI) counts the previous conversation in its estimate as the worker did:
    // a cap one token short of that estimate stops the replay before the follow-up's first call.
    const spec2 = (await h.ctx.store.readSpec(secondId))!;
    const agent = h.ctx.agents.get(spec2.agent)!;
    const previous = await h.ctx.redis.hget(h.ctx.keys.run(secondId).run, FOLLOW_UP_FIELD);
    expect(previous).toContain('ANSWER-ONE');
    const estimate =
      agent.estimateInputTokens(spec2.input) +
      followUpTokens(previous) +
      toolSchemaTokens(agent.tools.specs) +
      h.cfg.COMPLETION_TOKEN_CAP;
    // Spawned without blocking this process: the API it serves keeps its keep-alive timers (a spawnSync froze
    // them, and the next request met a socket the server closed the instant it woke).
    const cli = await new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        [...moduleArgs('src/server/replay'), secondId, '--max-tokens', String(estimate - 1), '--json'],
        { env: { ...process.env, ...h.env }, encoding: 'utf8' },
        (err, stdout, stderr) =>
          resolve({ status: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
      );
    });
    expect(cli.status, cli.stderr).toBe(0);
    expect(JSON.parse(cli.stdout.trim())).toMatchObject({
      stepsReplayed: 0,
      stoppedAt: { step: 1, status: 'budget_exceeded' },
    });
    const page = await fetch(`${url}/runs/${secondId}`, { headers: producerAuth });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain(`href="/runs/${firstId}"`);

    // A third event chains on: its previous conversation carries the first exchange too.
    openai.enqueue({ kind: 'turn', text: 'ANSWER-THREE', usage: { input: 150, output: 10 } });
    const third = await postRun(
      { tenant: 'acme', ticket: ticket('F-1', 'THIRD-MESSAGE thanks'), agent: { model: 'openai' } },
      'evt-3',
    );
    expect(third.body.previousRunId).toBe(secondId);
    expect(await h.waitForStatus(third.body.runId as string, DONE)).toBe('completed');
    const sentThird = requestsFor('THIRD-MESSAGE')[0]!;
    for (const s of ['FIRST-MESSAGE', 'ANSWER-ONE', 'SECOND-MESSAGE', 'ANSWER-TWO']) expect(sentThird).toContain(s);

    // No event named: the subject's latest run, nothing created.
    const plain = await postRun({ tenant: 'acme', ticket: ticket('F-1', 'no event'), agent: { model: 'openai' } });
    expect(plain).toMatchObject({ status: 200, body: { runId: third.body.runId, created: false } });
  });

  it('the previous conversation counts in the budget estimate: a follow-up it would push past maxTokens stops before the model call', async () => {
    const long = `LONG-ANSWER ${'the replacement ships from our warehouse next week; '.repeat(400)}`;
    openai.enqueue({ kind: 'turn', text: long, usage: { input: 100, output: 3000 } });
    const first = await postRun(
      { tenant: 'acme', ticket: ticket('F-B', 'BUDGET-FIRST'), agent: { model: 'openai' } },
      'evt-b1',
    );
    expect(await h.waitForStatus(first.body.runId as string, DONE)).toBe('completed');

    // The same budget is enough for a run with no previous conversation (another subject)...
    const budget = { maxTokens: 3500 };
    const control = await postRun(
      { tenant: 'acme', ticket: ticket('F-C', 'BUDGET-CONTROL'), agent: { model: 'openai' }, budget },
      'evt-c1',
    );
    expect(await h.waitForStatus(control.body.runId as string, DONE)).toBe('completed');

    // ...but not for the follow-up, whose first message carries the long answer: stopped, the model never asked.
    const before = openai.requests.length;
    const second = await postRun(
      { tenant: 'acme', ticket: ticket('F-B', 'BUDGET-SECOND'), agent: { model: 'openai' }, budget },
      'evt-b2',
    );
    expect(second.body.previousRunId).toBe(first.body.runId);
    expect(await h.waitForStatus(second.body.runId as string, DONE)).toBe('budget_exceeded');
    expect((await view(second.body.runId as string)).reason).toMatch(/token/);
    expect(requestsFor('BUDGET-SECOND')).toHaveLength(0);
    expect(openai.requests.length).toBe(before);
  });

  it('a follow-up arriving while the previous run is at work waits for it, then sees its final answer', async () => {
    const waitsBefore = await metric('agent_follow_up_waits_total');
    // The first run's model is unavailable for a second (429, Retry-After: 1): its step job is delayed, the run still at work.
    openai.enqueue(
      { kind: 'error', status: 429, retryAfter: '1' },
      { kind: 'turn', text: 'ANSWER-SLOW', usage: { input: 100, output: 10 } },
    );
    const first = await postRun(
      { tenant: 'acme', ticket: ticket('F-W', 'WAIT-FIRST'), agent: { model: 'openai' } },
      'evt-w1',
    );
    const firstId = first.body.runId as string;
    await until("the first run's model asked", 10_000, () => requestsFor('WAIT-FIRST').length > 0, 10);
    const second = await postRun(
      { tenant: 'acme', ticket: ticket('F-W', 'WAIT-SECOND'), agent: { model: 'openai' } },
      'evt-w2',
    );
    expect(second.status).toBe(201);
    expect(second.body.previousRunId).toBe(firstId);
    expect(await h.waitForStatus(second.body.runId as string, DONE)).toBe('completed');
    expect(await h.ctx.redis.hget(h.ctx.keys.run(firstId).run, 'status')).toBe('completed');
    // The follow-up asked the model only after the previous run's final answer, and with it.
    const order = openai.requests.map((r) => JSON.stringify(r.body.messages));
    const lastOfFirst = order.reduce(
      (last, m, i) => (m.includes('WAIT-FIRST') && !m.includes('WAIT-SECOND') ? i : last),
      -1,
    );
    const firstOfSecond = order.findIndex((m) => m.includes('WAIT-SECOND'));
    expect(firstOfSecond).toBeGreaterThan(lastOfFirst);
    expect(order[firstOfSecond]).toContain('ANSWER-SLOW');
    expect(await metric('agent_follow_up_waits_total')).toBeGreaterThan(waitsBefore);
  });

  it('a follow-up cancelled while it waits ends cancelled at once; its model is never asked', async () => {
    openai.enqueue(
      { kind: 'error', status: 429, retryAfter: '3' },
      { kind: 'turn', text: 'ANSWER-C', usage: { input: 100, output: 10 } },
    );
    const first = await postRun(
      { tenant: 'acme', ticket: ticket('F-X', 'CANCEL-FIRST'), agent: { model: 'openai' } },
      'evt-x1',
    );
    await until("the first run's model asked", 10_000, () => requestsFor('CANCEL-FIRST').length > 0, 10);
    const second = await postRun(
      { tenant: 'acme', ticket: ticket('F-X', 'CANCEL-SECOND'), agent: { model: 'openai' } },
      'evt-x2',
    );
    expect(second.body.previousRunId).toBe(first.body.runId);
    const res = await fetch(`${url}/v1/runs/${second.body.runId as string}/cancel`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${OPERATOR_TOKEN}` },
      body: '{}',
    });
    expect(res.status).toBeLessThan(300);
    expect(await h.waitForStatus(second.body.runId as string, DONE)).toBe('cancelled');
    // Cancelled while the previous run still waited out its model's Retry-After.
    expect(await h.ctx.redis.hget(h.ctx.keys.run(first.body.runId as string).run, 'status')).not.toBe('completed');
    expect(await h.waitForStatus(first.body.runId as string, DONE)).toBe('completed');
    expect(requestsFor('CANCEL-SECOND')).toHaveLength(0);
  });

  it('a bad event id (Idempotency-Key) is a 400 naming the field; nothing is written', async () => {
    const before = await keys();
    for (const bad of ['has space', 'x'.repeat(201), 'tab\there']) {
      const res = await postRun({ tenant: 'acme', ticket: sampleTicket('F-BAD'), agent: { model: 'openai' } }, bad);
      expect(res.status, bad).toBe(400);
      expect(res.body).toMatchObject({ error: 'invalid_request', fields: [{ path: 'Idempotency-Key' }] });
    }
    expect(await keysAdded(before)).toEqual([]);
  });
});

describe('follow-up runs through the signed webhooks', () => {
  it('a ticket event with a new event id is a follow-up; the same event redelivered is one run', async () => {
    const first = await postWebhook('/webhooks/tickets?tenant=acme', {
      v: 1,
      eventId: 'wh-1',
      ticket: sampleTicket('WF-1'),
    });
    expect(first).toMatchObject({ status: 201, body: { created: true, duplicate: false } });
    const firstId = first.body.runId as string;
    const again = await postWebhook('/webhooks/tickets?tenant=acme', {
      v: 1,
      eventId: 'wh-1',
      ticket: sampleTicket('WF-1'),
    });
    expect(again).toMatchObject({ status: 200, body: { runId: firstId, duplicate: true } });
    const reply = await postWebhook('/webhooks/tickets?tenant=acme', {
      v: 1,
      eventId: 'wh-2',
      ticket: { ...sampleTicket('WF-1'), body: 'Any news?' },
    });
    expect(reply).toMatchObject({ status: 201, body: { created: true, previousRunId: firstId } });
    const replyId = reply.body.runId as string;
    expect(replyId).not.toBe(firstId);
    expect((await view(replyId)).previousRunId).toBe(firstId);
    await h.waitForStatus(replyId, DONE);
    expect((await view(firstId)).nextRunId).toBe(replyId);
    // The follow-up's event redelivered (the sender lost the answer): the same run, named as the first answer named
    // it, with its status, as POST /v1/runs answers the same event again.
    const follow = { v: 1, eventId: 'wh-2', ticket: { ...sampleTicket('WF-1'), body: 'Any news?' } };
    expect(await postWebhook('/webhooks/tickets?tenant=acme', follow)).toEqual({
      status: 200,
      body: { runId: replyId, created: false, previousRunId: firstId, status: 'completed', duplicate: true },
    });
    // Its event's record gone (a handling that failed after making the run deletes it): the run is found the same way.
    await h.ctx.redis.del(h.ctx.keys.webhookEvent('acme', 'support', 'tickets', 'wh-2'));
    expect(await postWebhook('/webhooks/tickets?tenant=acme', follow)).toEqual({
      status: 200,
      body: { runId: replyId, created: false, previousRunId: firstId, status: 'completed', duplicate: false },
    });
  });

  it('a zendesk comment event with a new comment id is a follow-up carrying the comment; the same comment twice is one run', async () => {
    const zTicket = {
      id: 9001,
      subject: 'Broken mug',
      description: 'It arrived shattered',
      requester: { email: 'ada@example.com', name: 'Ada' },
    };
    const created = await postWebhook('/webhooks/zendesk/acme', { eventId: 'z-created-9001', ticket: zTicket });
    expect(created.status).toBe(201);
    const comment = { ticket: zTicket, comment: { id: 555, body: 'Still waiting for the replacement' } };
    const reply = await postWebhook('/webhooks/zendesk/acme', comment);
    expect(reply).toMatchObject({ status: 201, body: { created: true, previousRunId: created.body.runId } });
    const spec = await h.ctx.store.readSpec(reply.body.runId as string);
    expect(spec).toMatchObject({
      key: 'zendesk-9001',
      event: 'zendesk-comment-555',
      input: { body: 'Still waiting for the replacement' },
    });
    const redelivered = await postWebhook('/webhooks/zendesk/acme', comment);
    expect(redelivered).toMatchObject({ status: 200, body: { runId: reply.body.runId, duplicate: true } });
    await h.waitForStatus(reply.body.runId as string, DONE);
  });

  it('a bad event id is a 400 naming the field; nothing is written', async () => {
    const before = await keys();
    const res = await postWebhook('/webhooks/tickets?tenant=acme', {
      v: 1,
      eventId: 'bad event',
      ticket: sampleTicket('WF-BAD'),
    });
    expect(res.status).toBe(400);
    expect((res.body.fields as { path: string }[]).map((f) => f.path)).toContain('eventId');
    const z = await postWebhook('/webhooks/zendesk/acme', {
      ticket: { id: 1, subject: 'S', description: 'D', requester: { email: 'ada@example.com', name: 'Ada' } },
      comment: { id: 'no spaces allowed', body: 'x' },
    });
    expect(z.status).toBe(400);
    expect((z.body.fields as { path: string }[]).map((f) => f.path).join(' ')).toContain('comment.id');
    expect(await keysAdded(before)).toEqual([]);
  });
});

async function metric(name: string): Promise<number> {
  const line = (await h.ctx.metrics.registry.metrics())
    .split('\n')
    .find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  return line ? Number(line.split(' ').pop()) : 0;
}
