/**
 * Answers streamed across evictions: a real worker process streaming an answer
 * (the local OpenAI server dribbling tokens over HTTP) is SIGKILLed mid-answer;
 * another worker takes the step. The caller's SSE connection, reconnecting with
 * Last-Event-ID, receives `step_restarted` and then the whole regenerated
 * answer; the model was asked once per delivery. A decision journalled before
 * the kill is replayed, never asked or streamed again.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHarness, producerAuth, sampleTicket, type Harness } from '../../testkit/harness.js';
import { spawnWorker } from '../../testkit/processes.js';
import { readSse, type SseEvent } from '../../testkit/sse.js';
import { startOpenAIServer } from '../../testkit/modelServers/openai.js';
import type { ModelServer } from '../../testkit/modelServers/queue.js';
import { buildSpec } from '../../src/producer/intake.js';

/** An SSE event with its JSON data parsed. */
type RunEvent = Omit<SseEvent, 'data'> & { data: Record<string, unknown> };

let h: Harness;
let model: ModelServer;
let api: string;
beforeEach(async () => {
  model = await startOpenAIServer();
  h = await createHarness('streamkill', {
    OPENAI_BASE_URL: `${model.url}/v1`,
    OPENAI_API_KEY: 'sk-test',
    OPENAI_MODEL: 'gpt-4o-mini',
    MODEL_STREAMING: 'true',
    MODEL_STREAM_FLUSH_MS: '100',
    MODEL_STREAM_FLUSH_CHARS: '1024',
  });
  api = (await h.startApi()).url;
});
afterEach(async () => {
  await h.close();
  await model.close();
});

/** Reads the run's SSE stream from `lastEventId` until `until` says stop (then disconnects) or the server ends it. */
async function follow(
  runId: string,
  lastEventId: string | undefined,
  until: (events: RunEvent[]) => boolean = () => false,
): Promise<{ events: RunEvent[]; ended: boolean }> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), 60_000);
  const res = await fetch(`${api}/v1/runs/${runId}/events`, {
    headers: { ...producerAuth, ...(lastEventId ? { 'last-event-id': lastEventId } : {}) },
    signal: ac.signal,
  });
  expect(res.status).toBe(200);
  const events: RunEvent[] = [];
  try {
    const { ended } = await readSse(res, (raw) => {
      const last = raw.at(-1)!;
      events.push({ ...last, data: JSON.parse(last.data) as Record<string, unknown> });
      return until(events);
    });
    return { events, ended };
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
}

// A long lock: a loaded box must not hand the victim's step to itself again (a false stall); its death is
// noticed from its vanished Redis connection (owner watch, OWNER_WATCH_MS), not from the lock expiring.
const victimEnv = (extra: Record<string, string> = {}) => ({
  ...h.env,
  LOCK_DURATION_MS: '10000',
  STALLED_INTERVAL_MS: '5000',
  ...extra,
});
const texts = (events: RunEvent[]) =>
  events
    .filter((e) => e.event === 'text_delta')
    .map((e) => String(e.data.text))
    .join('');

describe('an answer streamed across an eviction', () => {
  it('SIGKILL mid-answer: the reconnecting client gets step_restarted, then the complete answer; one model request per delivery', async () => {
    // 480 characters in 60 pieces, 50 ms apart (3 s): the victim writes a few batches, then dies mid-answer.
    const answer = Array.from({ length: 12 }, (_, i) => `Part ${String(i).padStart(2, '0')} of the answer. `)
      .join('')
      .padEnd(480, '.');
    model.enqueue({ kind: 'turn', text: answer, usage: { input: 100, output: 120 }, eventDelayMs: 50 });
    model.enqueue({ kind: 'turn', text: answer, usage: { input: 100, output: 120 } });
    const spec = buildSpec(
      h.ctx,
      { tenant: 'acme', ticket: sampleTicket('SK-1'), agent: { model: 'openai' } },
      Date.now(),
    );
    await h.ctx.store.create(spec, Date.now());
    const victim = await spawnWorker(victimEnv());

    // The caller watches until part of the answer has arrived, then its connection drops with the worker.
    const first = await follow(spec.runId, undefined, (evs) => evs.filter((e) => e.event === 'text_delta').length >= 2);
    expect(first.ended).toBe(false);
    const partial = texts(first.events);
    expect(partial.length).toBeGreaterThan(0);
    expect(partial.length).toBeLessThan(answer.length);
    expect(answer.startsWith(partial)).toBe(true);
    victim.child.kill('SIGKILL');
    expect((await victim.exited).signal).toBe('SIGKILL');
    expect(model.requests).toHaveLength(1);

    await h.startWorker();
    const rest = await follow(spec.runId, first.events.at(-1)!.id);
    expect(rest.ended).toBe(true);
    const types = rest.events.map((e) => e.event);
    // No event twice across the two connections.
    expect(new Set([...first.events, ...rest.events].map((e) => e.id)).size).toBe(
      first.events.length + rest.events.length,
    );
    const restart = types.indexOf('step_restarted');
    expect(restart).toBeGreaterThanOrEqual(0);
    expect(rest.events[restart]!.data).toMatchObject({
      step: 1,
      reason: 'redelivered',
      previous: '1.1',
      delivery: '2.1',
    });
    // Whatever the victim still wrote before dying comes before the restart; after it, only the new delivery's text: the whole answer.
    const before = rest.events.slice(0, restart);
    expect(before.filter((e) => e.event === 'text_delta').every((e) => e.data.delivery === '1.1')).toBe(true);
    const after = rest.events.slice(restart + 1);
    expect(after.filter((e) => e.event === 'text_delta').every((e) => e.data.delivery === '2.1')).toBe(true);
    expect(texts(after)).toBe(answer);
    expect(types.slice(restart)).toEqual(expect.arrayContaining(['decision', 'step_committed', 'status_changed']));
    expect(types.at(-1)).toBe('status_changed');
    expect(rest.events.at(-1)!.data).toMatchObject({ status: 'completed' });
    // One request per delivery, and the journal holds the regenerated answer once.
    expect(model.requests).toHaveLength(2);
    const decisions = (await h.ctx.store.transcript(spec.runId)).filter((e) => e.kind === 'decision');
    expect(decisions).toHaveLength(1);
    expect(decisions[0]).toMatchObject({ final: answer, usage: { promptTokens: 100, completionTokens: 120 } });
  });

  it('a decision journalled before the kill is replayed: not asked again, not streamed again, no restart', async () => {
    // Step 1: text beside a write (the decision is journalled before the email), then the crash; step 2: the final answer.
    const said = 'I will email you the replacement details now.';
    model.enqueue({
      kind: 'turn',
      text: said,
      toolCalls: [
        { name: 'send_email', args: { to: 'ada@example.com', template: 'ack', subject: 'Re', body: 'On it.' } },
      ],
      usage: { input: 50, output: 30 },
    });
    model.enqueue({ kind: 'turn', text: 'All done.', usage: { input: 80, output: 5 } });
    const spec = buildSpec(
      h.ctx,
      { tenant: 'acme', ticket: sampleTicket('SK-2'), agent: { model: 'openai' } },
      Date.now(),
    );
    await h.ctx.store.create(spec, Date.now());
    const victim = await spawnWorker(victimEnv({ CRASH_POINTS: 'after_decision@1' }));
    expect((await victim.exited).signal).toBe('SIGKILL');
    expect(model.requests).toHaveLength(1);
    await h.startWorker();
    const all = await follow(spec.runId, undefined);
    expect(all.ended).toBe(true);
    const step1 = all.events.filter((e) => e.data.step === 1);
    expect(step1.filter((e) => e.event === 'step_started').map((e) => e.data.attempt)).toEqual([1, 2]);
    expect(step1.filter((e) => e.event === 'step_restarted')).toEqual([]);
    expect(step1.filter((e) => e.event === 'decision')).toHaveLength(1);
    expect(texts(step1)).toBe(said);
    expect(step1.filter((e) => e.event === 'text_delta').every((e) => e.data.delivery === '1.1')).toBe(true);
    expect(texts(all.events.filter((e) => e.data.step === 2))).toBe('All done.');
    // Step 1 asked once (before the kill), step 2 once: the journalled decision was never asked again.
    expect(model.requests).toHaveLength(2);
    expect(all.events.at(-1)!.data).toMatchObject({ status: 'completed' });
  });
});
