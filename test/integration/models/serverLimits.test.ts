/**
 * The local OpenAI-wire server's own rate limit (testkit/modelServers/rateLimit.ts): requests and
 * tokens per minute, x-ratelimit-* headers on every answer, and past the limit a 429
 * `rate_limit_exceeded` with Retry-After, as OpenAI answers; the AI SDK reads it as a retryable
 * error with the wait the server named.
 */
import { createOpenAI } from '@ai-sdk/openai';
import { generateText } from 'ai';
import { afterEach, describe, expect, it } from 'vitest';
import { startOpenAIServer, type OpenAIServer, type ServerLimits } from '../../../testkit/modelServers/openai.js';
import { classify } from '../../../src/models/aiSdk.js';
import { isRetryable } from '../../../src/core/errors.js';

let server: OpenAIServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function start(limits: ServerLimits): Promise<OpenAIServer> {
  server = await startOpenAIServer({ limits });
  return server;
}

function call(s: OpenAIServer): Promise<Response> {
  return fetch(`${s.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
  });
}

describe('the OpenAI-wire server holds a rate limit', () => {
  it('requests per minute: the burst passes with x-ratelimit-* headers, the next is a 429 with Retry-After', async () => {
    // 60 RPM holding ten seconds of refill: 10 requests at once, then one a second.
    const s = await start({ rpm: 60, burstMs: 10_000 });
    const ok = await Promise.all(Array.from({ length: 10 }, () => call(s)));
    expect(ok.map((r) => r.status)).toEqual(Array(10).fill(200));
    expect(ok[9]!.headers.get('x-ratelimit-limit-requests')).toBe('60');
    expect(Number(ok[9]!.headers.get('x-ratelimit-remaining-requests'))).toBeLessThanOrEqual(1);
    expect(ok[9]!.headers.get('x-ratelimit-reset-requests')).toMatch(/^\d+(ms|(\.\d+)?s)$/);
    const refused = await call(s);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('1');
    const waitMs = Number(refused.headers.get('retry-after-ms'));
    expect(waitMs).toBeGreaterThan(0);
    expect(waitMs).toBeLessThanOrEqual(1000);
    const body = (await refused.json()) as { error: { type: string; code: string; message: string } };
    expect(body.error).toMatchObject({ type: 'requests', code: 'rate_limit_exceeded' });
    expect(body.error.message).toMatch(
      /^Rate limit reached for gpt-4o-mini .* requests per min \(RPM\): Limit 60, Requested 1\./,
    );
    expect(s.limited).toBe(1);
    await new Promise((r) => setTimeout(r, waitMs + 5)); // the Retry-After under test: after it, served
    expect((await call(s)).status).toBe(200);
  });

  it('tokens per minute: counted as each reply’s usage; past it a 429 of type tokens, the queued reply kept', async () => {
    // 600 TPM holding ten seconds: 100 tokens, 10 a second; each reply costs 25.
    const s = await start({ tpm: 600, burstMs: 10_000 });
    s.fallback = { kind: 'turn', text: 'done', usage: { input: 20, output: 5 } };
    for (let i = 0; i < 4; i++) expect((await call(s)).status).toBe(200);
    s.enqueue({ kind: 'turn', text: 'kept for later', usage: { input: 20, output: 5 } });
    const refused = await call(s);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('x-ratelimit-limit-tokens')).toBe('600');
    expect(((await refused.json()) as { error: { type: string } }).error.type).toBe('tokens');
    // The Retry-After under test: after it, served.
    await new Promise((r) => setTimeout(r, Number(refused.headers.get('retry-after-ms')) + 5));
    const later = await call(s);
    expect(later.status).toBe(200);
    expect(((await later.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content).toBe(
      'kept for later',
    );
  });

  it('the AI SDK client reads the 429 as retryable, with the wait the server named', async () => {
    const s = await start({ rpm: 60, burstMs: 1000 });
    const model = createOpenAI({ baseURL: `${s.url}/v1`, apiKey: 'k' }).chat('gpt-4o-mini');
    await generateText({ model, prompt: 'hi', maxRetries: 0 });
    const err = await generateText({ model, prompt: 'hi', maxRetries: 0 }).catch((e: unknown) => e);
    const e = classify(err, Date.now());
    expect(isRetryable(e)).toBe(true);
    expect(e.details?.status).toBe(429);
    expect(isRetryable(e) && e.retryAfterMs).toBe(1000);
  });

  it('without limits nothing is refused and no x-ratelimit header is sent', async () => {
    server = await startOpenAIServer();
    const rs = await Promise.all(Array.from({ length: 30 }, () => call(server!)));
    expect(rs.every((r) => r.status === 200 && !r.headers.has('x-ratelimit-limit-requests'))).toBe(true);
    expect(server.limited).toBe(0);
  });
});
