/**
 * The AI SDK providers (src/models/aiSdk.ts) through the whole step path, over
 * HTTP against the local OpenAI and Anthropic servers (testkit/modelServers):
 * tool calls and the text beside them journalled and sent back, usage charged,
 * missing usage an error, and a provider outage waited out by delaying the step
 * job (Retry-After in seconds and as an HTTP date), then parked past its window.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, sampleTicket, type Harness } from '../../../testkit/harness.js';
import { startOpenAIServer } from '../../../testkit/modelServers/openai.js';
import { startAnthropicServer } from '../../../testkit/modelServers/anthropic.js';
import type { ModelServer } from '../../../testkit/modelServers/queue.js';
import { buildSpec } from '../../../src/producer/intake.js';
import type { DecisionEntry } from '../../../src/core/journal.js';
import { stepJobId } from '../../../src/store/keys.js';
import { readRunEvents } from '../../../testkit/runEvents.js';
import { until } from '../../../testkit/until.js';

let h: Harness;
let openai: ModelServer;
let compat: ModelServer;
let anthropic: ModelServer;
/** The outage window of this file's workers. */
const WINDOW_MS = 60_000;

beforeAll(async () => {
  [openai, compat, anthropic] = await Promise.all([startOpenAIServer(), startOpenAIServer(), startAnthropicServer()]);
  h = await createHarness('models', {
    OPENAI_BASE_URL: `${openai.url}/v1`,
    OPENAI_API_KEY: 'sk-test',
    OPENAI_MODEL: 'gpt-4o-mini',
    ANTHROPIC_BASE_URL: `${anthropic.url}/v1`,
    ANTHROPIC_API_KEY: 'ak-test',
    ANTHROPIC_MODEL: 'claude-test',
    OPENAI_COMPATIBLE_BASE_URL: `${compat.url}/v1`,
    OPENAI_COMPATIBLE_MODEL: 'llama-test',
    MODEL_OUTAGE_MAX_MS: String(WINDOW_MS),
  });
  await h.startWorker();
});
afterAll(async () => {
  await h.close();
  await Promise.all([openai, compat, anthropic].map((s) => s.close()));
});

const servers = () => ({ openai, anthropic, 'openai-compatible': compat }) as const;
type Provider = keyof ReturnType<typeof servers>;

async function start(model: Provider, ticketId: string): Promise<string> {
  const spec = buildSpec(h.ctx, { tenant: 'acme', ticket: sampleTicket(ticketId), agent: { model } }, Date.now());
  await h.ctx.store.create(spec, Date.now());
  return spec.runId;
}

async function decisions(runId: string): Promise<DecisionEntry[]> {
  return (await h.ctx.store.transcript(runId)).filter((e): e is DecisionEntry => e.kind === 'decision');
}

async function statusEvents(runId: string): Promise<{ status: string; reason: string }[]> {
  return (await readRunEvents(h.ctx, runId))
    .filter((e) => e.type === 'status_changed')
    .map((e) => JSON.parse(e.data) as { status: string; reason: string });
}

async function metric(name: string, labels: string): Promise<number> {
  const line = (await h.ctx.metrics.registry.metrics())
    .split('\n')
    .find((l) => l.startsWith(`${name}{`) && l.includes(labels));
  return line ? Number(line.split(' ').pop()) : 0;
}

/** Waits until the run's step job sits in the delayed set; returns the epoch ms it is delayed until, and the job. */
async function delayedUntil(runId: string, step: number): Promise<{ until: number; seenAt: number }> {
  const queue = h.ctx.store.queues.forRun(runId);
  const id = stepJobId(runId, step);
  const score = await until(`step ${step} of ${runId} delayed`, 30_000, () =>
    h.ctx.redis.zscore(queue.keys.delayed!, id),
  );
  // BullMQ's delayed score: the timestamp times 0x1000, plus a tie-breaking counter.
  return { until: Math.floor(Number(score) / 0x1000), seenAt: Date.now() };
}

async function promote(runId: string, step: number): Promise<void> {
  const job = await h.ctx.store.queues.forRun(runId).getJob(stepJobId(runId, step));
  await job!.promote();
}

describe.each(['openai', 'anthropic', 'openai-compatible'] as const)('the %s provider over HTTP', (model) => {
  it('journals tool calls with the text beside them, sends both back, charges the usage of each call', async () => {
    const server = servers()[model];
    const before = server.requests.length;
    server.enqueue(
      {
        kind: 'turn',
        text: 'Let me read the ticket first.',
        toolCalls: [{ name: 'read_ticket', args: {} }],
        usage: { input: 120, output: 15 },
      },
      { kind: 'turn', text: 'Replacement sent.', usage: { input: 200, output: 8 } },
    );
    const runId = await start(model, `M-${model}`);
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'budget_exceeded', 'needs_human'])).toBe('completed');
    const [first, second] = await decisions(runId);
    expect(first).toMatchObject({
      model,
      text: 'Let me read the ticket first.',
      toolCalls: [{ name: 'read_ticket', args: {} }],
      usage: { promptTokens: 120, completionTokens: 15 },
    });
    expect(first!.final).toBeUndefined();
    expect(second).toMatchObject({
      final: 'Replacement sent.',
      toolCalls: [],
      usage: { promptTokens: 200, completionTokens: 8 },
    });
    expect((await h.ctx.store.readState(runId))!.used.tokens).toBe(120 + 15 + 200 + 8);
    // The second request carries the first turn's text and tool call, and the tool's result, in the vendor's shape.
    const sent = JSON.stringify(server.requests[before + 1]!.body.messages);
    expect(sent).toContain('Let me read the ticket first.');
    expect(sent).toContain(first!.toolCalls[0]!.id);
    expect(sent).toContain('My order arrived broken'); // the read_ticket observation
    const tools = JSON.stringify(server.requests[before]!.body.tools);
    expect(tools).toContain('read_ticket');
    expect(tools).not.toContain('$schema');
  });

  it('a response without usage fails the run with missing_usage, never zero', async () => {
    servers()[model].enqueue({ kind: 'turn', toolCalls: [{ name: 'read_ticket', args: {} }], usage: null });
    const runId = await start(model, `MU-${model}`);
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'budget_exceeded', 'needs_human'])).toBe('failed');
    const state = (await h.ctx.store.readState(runId))!;
    expect(state.reason).toMatch(/^missing_usage/);
    // The answer was generated (and billed): charged its bound, the estimate's prompt tokens and the completion cap.
    expect(state.used.tokens).toBeGreaterThan(h.cfg.COMPLETION_TOKEN_CAP);
  });
});

describe('request shapes', () => {
  it('OpenAI gets max_completion_tokens (not max_tokens), Anthropic max_tokens, both the instructions as system', async () => {
    const o = openai.requests.at(-1)!.body;
    expect(o.max_completion_tokens).toBe(h.cfg.COMPLETION_TOKEN_CAP);
    expect(o.max_tokens).toBeUndefined();
    expect(openai.requests.at(-1)!.headers.authorization).toBe('Bearer sk-test');
    const a = anthropic.requests.at(-1)!;
    expect(a.body.max_tokens).toBe(h.cfg.COMPLETION_TOKEN_CAP);
    expect(JSON.stringify(a.body.system)).toContain('You are a support agent');
    expect(a.headers['x-api-key']).toBe('ak-test');
    expect(compat.requests.at(-1)!.headers.authorization).toBeUndefined();
  });
});

describe('a provider outage is a wait, not a failure', () => {
  it('429 with Retry-After in seconds delays the step job by that long; promoted, the run completes', async () => {
    openai.enqueue(
      { kind: 'error', status: 429, retryAfter: '30' },
      { kind: 'turn', text: 'ok', usage: { input: 10, output: 2 } },
    );
    const waitsBefore = await metric('agent_model_waits_total', 'provider="openai"');
    const before = openai.requests.length;
    const runId = await start('openai', 'W-seconds');
    const { until, seenAt } = await delayedUntil(runId, 1);
    const askedAt = openai.requests[before]!.at;
    // Delayed by the 30 s the server asked, counted from when the worker read the 429 (between the request and our sighting).
    expect(until).toBeGreaterThanOrEqual(askedAt + 30_000);
    expect(until).toBeLessThanOrEqual(seenAt + 30_000);
    expect(['queued', 'running']).toContain(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status'));
    expect(await metric('agent_model_waits_total', 'provider="openai"')).toBe(waitsBefore + 1);
    expect(openai.requests.length).toBe(before + 1); // no retry slept in the worker meanwhile
    await promote(runId, 1);
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'budget_exceeded', 'needs_human'])).toBe('completed');
    expect((await decisions(runId))[0]).toMatchObject({
      final: 'ok',
      usage: { promptTokens: 10, completionTokens: 2 },
    });
  });

  it('529 with Retry-After as an HTTP date delays the step job until that date exactly', async () => {
    const at = new Date(Math.ceil((Date.now() + 45_000) / 1000) * 1000);
    anthropic.enqueue(
      { kind: 'error', status: 529, retryAfter: at.toUTCString() },
      { kind: 'turn', text: 'ok', usage: { input: 10, output: 2 } },
    );
    const before = anthropic.requests.length;
    const runId = await start('anthropic', 'W-date');
    const { until, seenAt } = await delayedUntil(runId, 1);
    // Until that date (BullMQ re-reads its clock when it moves the job: at most the time between the request and our sighting later).
    expect(until).toBeGreaterThanOrEqual(at.getTime());
    expect(until - at.getTime()).toBeLessThanOrEqual(seenAt - anthropic.requests[before]!.at);
    await promote(runId, 1);
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'budget_exceeded', 'needs_human'])).toBe('completed');
  });

  it('an outage that outlasts the window parks the run needs_human / provider_unavailable, with its event and metric', async () => {
    // First failure: a 1 s wait fits the window. Second: the next wait would end past it.
    compat.enqueue(
      { kind: 'error', status: 503, retryAfter: '1' },
      { kind: 'error', status: 503, retryAfter: String(WINDOW_MS / 1000) },
    );
    const parkedBefore = await metric('agent_runs_finished_total', 'reason="provider_unavailable"');
    const runId = await start('openai-compatible', 'W-window');
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'budget_exceeded', 'needs_human'])).toBe('needs_human');
    const state = (await h.ctx.store.readState(runId))!;
    expect(state.reason).toMatch(
      /^provider_unavailable: openai-compatible failing for \d+ ms, next try in 60000 ms, window 60000 ms$/,
    );
    expect(state.used.steps).toBe(0);
    expect((await statusEvents(runId)).at(-1)).toMatchObject({ status: 'needs_human', reason: state.reason });
    expect(await metric('agent_runs_finished_total', 'reason="provider_unavailable"')).toBe(parkedBefore + 1);
    // The first wait was a delay: the step job was delivered twice, and asked the model once per delivery.
    expect(compat.requests.filter((r) => JSON.stringify(r.body).includes('W-window'))).toHaveLength(2);
  });

  it('a wait that would end past the run deadline stops it budget_exceeded (wall_clock), not later', async () => {
    openai.enqueue({ kind: 'error', status: 429, retryAfter: '50' });
    const spec = buildSpec(
      h.ctx,
      { tenant: 'acme', ticket: sampleTicket('W-deadline'), agent: { model: 'openai' }, budget: { maxWallMs: 20_000 } },
      Date.now(),
    );
    await h.ctx.store.create(spec, Date.now());
    expect(await h.waitForStatus(spec.runId, ['completed', 'failed', 'budget_exceeded', 'needs_human'])).toBe(
      'budget_exceeded',
    );
    expect((await h.ctx.store.readState(spec.runId))!.reason).toMatch(
      /^wall_clock: a retry would wait past the deadline/,
    );
  });
});
