/**
 * Streamed answers (MODEL_STREAMING): the providers' text deltas reach the
 * run's event stream batched (a long answer is a handful of events), the usage
 * comes from the stream's final chunk, a stream without usage is an error, and
 * a stream cut short is a failed attempt whose retry announces step_restarted
 * before its own text. Over HTTP against the local OpenAI and Anthropic servers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, sampleTicket, type Harness } from '../../../testkit/harness.js';
import { startOpenAIServer } from '../../../testkit/modelServers/openai.js';
import { startAnthropicServer } from '../../../testkit/modelServers/anthropic.js';
import type { ModelServer } from '../../../testkit/modelServers/queue.js';
import { buildSpec } from '../../../src/producer/intake.js';
import type { DecisionEntry } from '../../../src/core/journal.js';
import { TextStream } from '../../../src/worker/textStream.js';
import { appendTextDeltas } from '../../../src/store/calls/appendTextDeltas.js';
import { FenceError } from '../../../src/core/errors.js';
import { readRunEvents } from '../../../testkit/runEvents.js';

let h: Harness;
let openai: ModelServer;
let anthropic: ModelServer;
const FLUSH_CHARS = 1024;

beforeAll(async () => {
  [openai, anthropic] = await Promise.all([startOpenAIServer(), startAnthropicServer()]);
  h = await createHarness('streaming', {
    OPENAI_BASE_URL: `${openai.url}/v1`,
    OPENAI_API_KEY: 'sk-test',
    OPENAI_MODEL: 'gpt-4o-mini',
    ANTHROPIC_BASE_URL: `${anthropic.url}/v1`,
    ANTHROPIC_API_KEY: 'ak-test',
    ANTHROPIC_MODEL: 'claude-test',
    MODEL_STREAMING: 'true',
    MODEL_STREAM_FLUSH_CHARS: String(FLUSH_CHARS),
    MODEL_STREAM_FLUSH_MS: '250',
    // Exact event counts: no false-stall redelivery of an in-process worker on a loaded box (the e2e test kills for real).
    LOCK_DURATION_MS: '10000',
    STALLED_INTERVAL_MS: '5000',
  });
  await h.startWorker();
});
afterAll(async () => {
  await h.close();
  await Promise.all([openai.close(), anthropic.close()]);
});

interface Ev {
  type: string;
  data: Record<string, unknown>;
}

async function events(runId: string): Promise<Ev[]> {
  return (await readRunEvents(h.ctx, runId)).map((e) => ({
    type: e.type,
    data: JSON.parse(e.data) as Record<string, unknown>,
  }));
}

async function start(model: 'openai' | 'anthropic', ticketId: string): Promise<string> {
  const spec = buildSpec(h.ctx, { tenant: 'acme', ticket: sampleTicket(ticketId), agent: { model } }, Date.now());
  await h.ctx.store.create(spec, Date.now());
  return spec.runId;
}

async function decisions(runId: string): Promise<DecisionEntry[]> {
  return (await h.ctx.store.transcript(runId)).filter((e): e is DecisionEntry => e.kind === 'decision');
}

async function metric(name: string, labels: string): Promise<number> {
  const line = (await h.ctx.metrics.registry.metrics())
    .split('\n')
    .find((l) => l.startsWith(`${name}{`) && l.includes(labels));
  return line ? Number(line.split(' ').pop()) : 0;
}

/** About 2,000 tokens of answer (8,000 characters), different on every line. */
const longAnswer = Array.from(
  { length: 100 },
  (_, i) => `Line ${String(i).padStart(3, '0')}: the replacement mug ships today, tracking follows. `,
)
  .join('')
  .slice(0, 8000);

describe.each(['openai', 'anthropic'] as const)('streamed answers through %s', (model) => {
  const server = () => (model === 'openai' ? openai : anthropic);

  it("a long answer reaches the events in a few batches, in order, and the usage is the final chunk's", async () => {
    server().enqueue({ kind: 'turn', text: longAnswer, usage: { input: 300, output: 2000 } });
    const runId = await start(model, `S-long-${model}`);
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human', 'budget_exceeded'])).toBe('completed');
    const evs = await events(runId);
    const deltas = evs.filter((e) => e.type === 'text_delta');
    // The server sends 8-character pieces (1,000 of them): batched to about one event per FLUSH_CHARS.
    expect(deltas.length).toBeGreaterThanOrEqual(Math.floor(longAnswer.length / FLUSH_CHARS));
    expect(deltas.length).toBeLessThanOrEqual(Math.ceil(longAnswer.length / FLUSH_CHARS) + 3);
    expect(deltas.map((e) => e.data.text).join('')).toBe(longAnswer);
    expect(deltas.map((e) => e.data.seq)).toEqual(deltas.map((_, i) => i));
    for (const d of deltas) expect(d.data).toMatchObject({ step: 1, delivery: '1.1' });
    // step_started first, the text before the decision, the decision once, no restart.
    const order = evs.map((e) => e.type).filter((t) => t !== 'text_delta');
    expect(order).toEqual(['run_created', 'step_started', 'decision', 'step_committed', 'status_changed']);
    expect(evs.findIndex((e) => e.type === 'text_delta')).toBeGreaterThan(
      evs.findIndex((e) => e.type === 'step_started'),
    );
    expect(evs.map((e) => e.type).lastIndexOf('text_delta')).toBeLessThan(evs.findIndex((e) => e.type === 'decision'));
    const [decision] = await decisions(runId);
    expect(decision).toMatchObject({ final: longAnswer, usage: { promptTokens: 300, completionTokens: 2000 } });
    expect((await h.ctx.store.readState(runId))!.used.tokens).toBe(2300);
    const last = server().requests.at(-1)!.body;
    expect(last.stream).toBe(true);
  });

  it('a stream cut mid-answer is a failed attempt: the retry announces step_restarted, then the whole answer', async () => {
    const answer = 'Your refund was approved and will reach your card within five days.';
    server().enqueue(
      // Slow enough that the first pieces are written (250 ms flush) before the cut.
      { kind: 'turn', text: answer, usage: { input: 40, output: 20 }, truncateAfterEvents: 5, eventDelayMs: 100 },
      { kind: 'turn', text: answer, usage: { input: 40, output: 20 } },
    );
    const before = server().requests.length;
    const runId = await start(model, `S-cut-${model}`);
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human', 'budget_exceeded'])).toBe('completed');
    const evs = (await events(runId)).filter((e) => e.data.step === 1);
    const types = evs.map((e) => e.type);
    const restart = types.indexOf('step_restarted');
    expect(restart).toBeGreaterThan(types.indexOf('text_delta')); // some text of the cut attempt went out first
    expect(evs[restart]!.data).toMatchObject({ step: 1, reason: 'attempt_failed', previous: '1.1', delivery: '1.2' });
    expect(types.filter((t) => t === 'step_restarted')).toHaveLength(1);
    const after = evs.slice(restart + 1).filter((e) => e.type === 'text_delta');
    expect(after.map((e) => e.data.text).join('')).toBe(answer);
    for (const d of after) expect(d.data.delivery).toBe('1.2');
    const before_ = evs.slice(0, restart).filter((e) => e.type === 'text_delta');
    expect(before_.every((e) => e.data.delivery === '1.1')).toBe(true);
    expect(answer.startsWith(before_.map((e) => e.data.text).join(''))).toBe(true);
    expect(server().requests.length - before).toBe(2); // one request per attempt
    const [decision] = await decisions(runId);
    // The cut attempt reported nothing: it is charged its bound (the estimate's prompt tokens and the completion cap),
    // the complete one what it reported (40 in, 20 out).
    expect(decision).toMatchObject({ final: answer, attempts: 2 });
    expect(decision!.usage.completionTokens).toBe(20 + h.cfg.COMPLETION_TOKEN_CAP);
    expect(decision!.usage.promptTokens).toBeGreaterThan(40);
  });
});

describe('a restart with no new text', () => {
  it('a retry that answers with tool calls only still announces step_restarted (the partial text is void)', async () => {
    openai.enqueue(
      {
        kind: 'turn',
        text: 'Let me think about this for a while before I answer.',
        usage: { input: 10, output: 9 },
        truncateAfterEvents: 5,
        eventDelayMs: 100,
      },
      { kind: 'turn', toolCalls: [{ name: 'read_ticket', args: {} }], usage: { input: 10, output: 3 } },
      { kind: 'turn', text: 'Done.', usage: { input: 20, output: 2 } },
    );
    const runId = await start('openai', 'S-marker');
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human', 'budget_exceeded'])).toBe('completed');
    const step1 = (await events(runId)).filter((e) => e.data.step === 1);
    const types = step1.map((e) => e.type);
    expect(types.filter((t) => t === 'text_delta').length).toBeGreaterThan(0);
    expect(types.indexOf('step_restarted')).toBeGreaterThan(types.lastIndexOf('text_delta'));
    expect(step1.find((e) => e.type === 'step_restarted')!.data).toMatchObject({
      reason: 'attempt_failed',
      previous: '1.1',
      delivery: '1.2',
    });
    expect(types.indexOf('decision')).toBeGreaterThan(types.indexOf('step_restarted'));
  });

  it('a first answer with tool calls only costs no marker write', async () => {
    const before = await metric('agent_text_delta_batches_total', 'outcome="restarted"');
    openai.enqueue(
      { kind: 'turn', toolCalls: [{ name: 'read_ticket', args: {} }], usage: { input: 10, output: 3 } },
      { kind: 'turn', text: 'Ok.', usage: { input: 20, output: 2 } },
    );
    const runId = await start('openai', 'S-nomarker');
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human', 'budget_exceeded'])).toBe('completed');
    expect((await events(runId)).filter((e) => e.type === 'step_restarted')).toEqual([]);
    expect(await metric('agent_text_delta_batches_total', 'outcome="restarted"')).toBe(before);
  });
});

describe('usage of a streamed answer', () => {
  it('a stream that finishes without its usage chunk fails the run with missing_usage, never zero', async () => {
    openai.enqueue({ kind: 'turn', text: 'An answer with no usage at the end.', usage: null });
    const runId = await start('openai', 'S-nousage');
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human', 'budget_exceeded'])).toBe('failed');
    const state = (await h.ctx.store.readState(runId))!;
    expect(state.reason).toMatch(/^missing_usage/);
    // The answer was generated (and billed): charged its bound, the estimate's prompt tokens and the completion cap.
    expect(state.used.tokens).toBeGreaterThan(h.cfg.COMPLETION_TOKEN_CAP);
    expect(await decisions(runId)).toEqual([]);
  });

  it('a tool-call turn streams no text events and journals the call', async () => {
    openai.enqueue(
      { kind: 'turn', toolCalls: [{ name: 'read_ticket', args: {} }], usage: { input: 10, output: 3 } },
      { kind: 'turn', text: 'Done.', usage: { input: 20, output: 2 } },
    );
    const runId = await start('openai', 'S-tools');
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human', 'budget_exceeded'])).toBe('completed');
    const evs = await events(runId);
    expect(evs.filter((e) => e.type === 'text_delta').map((e) => [e.data.step, e.data.text])).toEqual([[2, 'Done.']]);
    expect((await decisions(runId))[0]).toMatchObject({
      toolCalls: [{ name: 'read_ticket' }],
      usage: { promptTokens: 10, completionTokens: 3 },
    });
  });
});

describe('the scripted provider (demo and tests)', () => {
  it('hands its final answer on in pieces: the demo shows the answer being written', async () => {
    const final = 'Your replacement mug ships today; the tracking number follows by email.';
    const spec = buildSpec(
      h.ctx,
      {
        tenant: 'acme',
        ticket: sampleTicket('S-scripted'),
        agent: {
          model: 'scripted',
          script: [{ toolCalls: [], final, usage: { promptTokens: 5, completionTokens: 5 }, transientFailures: 0 }],
        },
      },
      Date.now(),
    );
    await h.ctx.store.create(spec, Date.now());
    expect(await h.waitForStatus(spec.runId, ['completed', 'failed', 'needs_human', 'budget_exceeded'])).toBe(
      'completed',
    );
    const deltas = (await events(spec.runId)).filter((e) => e.type === 'text_delta');
    expect(deltas.map((e) => e.data.text).join('')).toBe(final);
  });
});

describe('the fence on streamed text', () => {
  /** A run hash at step 1 whose job lock is held by `holder` (no worker takes it: no job exists). */
  async function ownedRun(holder: string) {
    const runId = `r_${Math.random().toString(36).slice(2, 10).padEnd(24, '0')}`;
    const k = h.ctx.keys.run(runId);
    const jobId = `${runId}.s1`;
    const lock = h.ctx.keys.jobLock(h.ctx.keys.shardOf(runId), jobId);
    await h.ctx.redis.hset(k.run, { cursor: 1, status: 'running', jobId });
    await h.ctx.redis.set(lock, holder);
    return { runId, k, jobId, lock };
  }

  it("a worker that no longer holds the step's lock writes no text, and counts the stop", async () => {
    const { k, jobId, lock } = await ownedRun('someone-else');
    const fenced = await metric('agent_text_delta_batches_total', 'outcome="fence_lost"');
    const stream = new TextStream({
      redis: h.ctx.redis,
      keys: { run: k.run, events: k.events, jobLock: lock },
      token: 'mine',
      step: 1,
      jobId,
      jobAttempt: 1,
      jobInstance: 1,
      redelivered: false,
      eventsMaxLen: 1000,
      flushMs: 10,
      flushChars: 4,
      startedEvent: '{"step":1}',
      metrics: h.ctx.metrics,
      log: h.ctx.log,
    });
    const attempt = stream.attempt(1);
    attempt.push('first batch');
    attempt.push('second batch');
    await attempt.end(true);
    expect(await h.ctx.redis.xlen(k.events)).toBe(0);
    expect(stream.startedEmitted).toBe(false);
    expect(await metric('agent_text_delta_batches_total', 'outcome="fence_lost"')).toBe(fenced + 1); // stopped at the first refusal
  });

  it('a step whose decision is journalled is never streamed again', async () => {
    const { k, jobId, lock } = await ownedRun('mine');
    await h.ctx.redis.hset(k.run, { decidedStep: 1 });
    await expect(
      appendTextDeltas(
        h.ctx.redis,
        { run: k.run, events: k.events, jobLock: lock },
        {
          token: 'mine',
          step: 1,
          jobId,
          deliveryKey: '1-2.1',
          eventsMaxLen: 1000,
          event: '{}',
          startedEvent: '',
        },
      ),
    ).rejects.toBeInstanceOf(FenceError);
    expect(await h.ctx.redis.xlen(k.events)).toBe(0);
  });
});
