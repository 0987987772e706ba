/**
 * The local model servers speak the vendors' wire formats: the AI SDK's own
 * clients (streaming and not) read them as they read OpenAI and Anthropic. And
 * the pure parts of the providers: Retry-After in both forms, error classes.
 */
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import { APICallError, jsonSchema, streamText } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAnthropicServer } from '../../../testkit/modelServers/anthropic.js';
import { startOpenAIServer } from '../../../testkit/modelServers/openai.js';
import type { ModelServer } from '../../../testkit/modelServers/queue.js';
import { parseRetryAfter } from '../../../src/core/retryAfter.js';
import { classify } from '../../../src/models/aiSdk.js';
import { RetryableError, TerminalError } from '../../../src/core/errors.js';

let openai: ModelServer;
let anthropic: ModelServer;
beforeAll(async () => {
  [openai, anthropic] = await Promise.all([startOpenAIServer(), startAnthropicServer()]);
});
afterAll(async () => {
  await Promise.all([openai.close(), anthropic.close()]);
});

const tools = {
  read_ticket: {
    description: 'Read the ticket',
    inputSchema: jsonSchema({ type: 'object', properties: { id: { type: 'string' } } }),
  },
};

async function stream(model: Parameters<typeof streamText>[0]['model']) {
  const r = streamText({ model, prompt: 'hi', tools, maxRetries: 0, onError: () => {} });
  let text = '';
  let deltas = 0;
  for await (const d of r.textStream) {
    text += d;
    deltas++;
  }
  return { text, deltas, toolCalls: await r.toolCalls, usage: await r.usage };
}

describe('streaming, read by the SDK', () => {
  it('OpenAI SSE chunks: text deltas, a tool call in pieces, the include_usage chunk', async () => {
    openai.enqueue({
      kind: 'turn',
      text: 'Checking the ticket for you.',
      toolCalls: [{ name: 'read_ticket', args: { id: 'T-1' } }],
      usage: { input: 42, output: 9 },
    });
    const model = createOpenAI({ baseURL: `${openai.url}/v1`, apiKey: 'k' }).chat('gpt-4o-mini');
    const r = await stream(model);
    expect(r.text).toBe('Checking the ticket for you.');
    expect(r.deltas).toBeGreaterThan(1);
    expect(r.toolCalls.map((c) => [c.toolName, c.input])).toEqual([['read_ticket', { id: 'T-1' }]]);
    expect(r.usage).toMatchObject({ inputTokens: 42, outputTokens: 9 });
    expect(openai.requests.at(-1)!.body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
  });

  it('Anthropic SSE events: text_delta, input_json_delta, usage from message_start and message_delta', async () => {
    anthropic.enqueue({
      kind: 'turn',
      text: 'Checking.',
      toolCalls: [{ name: 'read_ticket', args: { id: 'T-2' } }],
      usage: { input: 30, output: 7 },
    });
    const model = createAnthropic({ baseURL: `${anthropic.url}/v1`, apiKey: 'k' })('claude-test');
    const r = await stream(model);
    expect(r.text).toBe('Checking.');
    expect(r.toolCalls.map((c) => [c.toolName, c.input])).toEqual([['read_ticket', { id: 'T-2' }]]);
    expect(r.usage).toMatchObject({ inputTokens: 30, outputTokens: 7 });
  });

  it('a stream cut mid-answer ends without usage (the caller must call that an error, never zero)', async () => {
    openai.enqueue({
      kind: 'turn',
      text: 'This answer will be cut off half way through.',
      usage: { input: 5, output: 5 },
      truncateAfterEvents: 3,
    });
    const model = createOpenAI({ baseURL: `${openai.url}/v1`, apiKey: 'k' }).chat('gpt-4o-mini');
    const r = streamText({ model, prompt: 'hi', tools, maxRetries: 0, onError: () => {} });
    let text = '';
    const read = (async () => {
      for await (const d of r.textStream) text += d;
    })().catch((e: unknown) => e);
    const cut = await read;
    // The client got the first deltas, then the cut: an error or a stream with no usage, never a complete answer.
    expect(text).toBe('This answer will'); // the role chunk and two 8-character deltas
    const usage = await Promise.resolve(r.usage).catch(() => undefined);
    if (!(cut instanceof Error)) expect(usage?.inputTokens).toBeUndefined();
  });
});

describe('Retry-After and error classes', () => {
  const now = Date.parse('2026-12-03T12:00:00Z');

  it('reads delay-seconds and HTTP dates, uncapped; ignores what is neither', () => {
    expect(parseRetryAfter('30', now)).toBe(30_000);
    expect(parseRetryAfter('3600', now)).toBe(3_600_000);
    expect(parseRetryAfter('Thu, 03 Dec 2026 12:01:30 GMT', now)).toBe(90_000);
    expect(parseRetryAfter('Thu, 03 Dec 2026 11:00:00 GMT', now)).toBe(0);
    for (const bad of [null, undefined, '', '1.5', '-3', 'soon']) expect(parseRetryAfter(bad, now)).toBeUndefined();
  });

  const apiError = (statusCode: number | undefined, headers: Record<string, string> = {}, body = '') =>
    new APICallError({
      message: 'x',
      url: 'http://m',
      requestBodyValues: {},
      ...(statusCode !== undefined ? { statusCode } : {}),
      responseHeaders: headers,
      responseBody: body,
    });

  it('429, 5xx, 529, 408 and no answer are retryable with the Retry-After; other 4xx terminal', () => {
    const r = classify(apiError(429, { 'Retry-After': '30' }), now);
    expect(r).toBeInstanceOf(RetryableError);
    expect((r as RetryableError).retryAfterMs).toBe(30_000);
    expect(
      (classify(apiError(529, { 'retry-after': 'Thu, 03 Dec 2026 12:00:10 GMT' }), now) as RetryableError).retryAfterMs,
    ).toBe(10_000);
    for (const s of [500, 502, 503, 408, undefined])
      expect(classify(apiError(s), now), String(s)).toBeInstanceOf(RetryableError);
    for (const s of [400, 401, 403, 404, 422]) {
      const e = classify(apiError(s), now);
      expect(e, String(s)).toBeInstanceOf(TerminalError);
      expect(e.code).toBe('model_failed');
    }
    expect(classify(apiError(200, {}, JSON.stringify({ id: 'm', content: [] })), now).code).toBe('missing_usage');
  });
});
