/**
 * Model rate limits through real steps: a worker, the OpenAI provider pointed at the local server that
 * holds its own limit (testkit/modelServers/rateLimit.ts), the fleet's bucket set just under it. Many
 * runs complete with at most 1 % of calls refused, the steps that found the bucket empty waited
 * (agent_rate_limit_waits_total); and a 429 that still arrives empties the bucket for its Retry-After:
 * another run's attempt waits it out instead of being sent.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createHarness, producerAuth, sampleTicket, type Harness } from '../../testkit/harness.js';
import { startOpenAIServer, type OpenAIServer, type ServerLimits } from '../../testkit/modelServers/openai.js';
import { until } from '../../testkit/until.js';

let h: Harness | undefined;
let openai: OpenAIServer | undefined;
afterEach(async () => {
  await h?.close();
  await openai?.close();
  h = openai = undefined;
});

async function fleet(server: ServerLimits | undefined, rpm: number): Promise<{ h: Harness; url: string }> {
  openai = await startOpenAIServer(server ? { limits: server } : {});
  h = await createHarness('ratemodel', {
    OPENAI_BASE_URL: `${openai.url}/v1`,
    OPENAI_API_KEY: 'sk-test',
    OPENAI_MODEL: 'gpt-4o-mini',
    MODEL_RATE_LIMITS: JSON.stringify([{ provider: 'openai', model: 'gpt-4o-mini', rpm, tpm: 0 }]),
    MODEL_RATE_BURST_MS: '1000',
    MODEL_MAX_ATTEMPTS: '10',
  });
  await h.startWorker();
  return { h, url: (await h.startApi()).url };
}

async function createRun(url: string, marker: string): Promise<string> {
  const res = await fetch(`${url}/v1/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': marker, ...producerAuth },
    body: JSON.stringify({
      tenant: 'acme',
      ticket: { ...sampleTicket(marker), body: marker },
      agent: { model: 'openai' },
    }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { runId: string }).runId;
}

async function counter(hh: Harness, name: string): Promise<number> {
  const m = await hh.ctx.metrics.registry.getSingleMetric(name)?.get();
  return (m?.values ?? []).reduce((n, v) => n + v.value, 0);
}

describe('model rate limits through a real step', () => {
  it('the fleet just under the server’s limit: every run completes, 429s at most 1 % of calls, waits counted', async () => {
    // The server: 600 RPM holding three seconds (30 at once, then 10 a second; OpenAI holds a whole minute). The
    // fleet: 540 RPM holding one second (9, then 9 a second). The server's extra burst covers the time between a
    // step's reservation and its request reaching the server (up to a second on this loaded in-process fleet:
    // requests reserved apart arrive together); sixty runs at once without the fleet's bucket get ~30 429s.
    const { h: hh, url } = await fleet({ rpm: 600, burstMs: 3000 }, 540);
    const stamp = Date.now();
    const ids = await Promise.all(Array.from({ length: 60 }, (_, i) => createRun(url, `RL-${stamp}-${i}`)));
    for (const id of ids)
      expect(await hh.waitForStatus(id, ['completed', 'failed', 'budget_exceeded'], 60_000)).toBe('completed');
    const calls = openai!.requests.length;
    expect(calls).toBeGreaterThanOrEqual(60);
    expect(openai!.limited).toBeLessThanOrEqual(Math.floor(calls / 100));
    expect(await counter(hh, 'agent_rate_limit_waits_total')).toBeGreaterThan(0);
    // Paced by the bucket: 60 calls past a burst of 9 at 9 a second take at least ~5.6 s.
    const spanMs = openai!.requests.at(-1)!.at - openai!.requests[0]!.at;
    expect(spanMs).toBeGreaterThan(5000);
  }, 90_000);

  it('a 429 that still arrives empties the bucket for its Retry-After: the next run’s attempt waits it out', async () => {
    const { h: hh, url } = await fleet(undefined, 6000);
    openai!.enqueue({ kind: 'error', status: 429, retryAfter: '2' });
    const first = await createRun(url, `RL429-${Date.now()}-a`);
    const refusedAt = (await until('the first request, refused', 10_000, () => openai!.requests[0])).at;
    // The server records the request before it answers; the worker blocks the bucket once it has read the 429.
    const bucketKey = hh.ctx.keys.rateBucket('openai/gpt-4o-mini').bucket;
    const blockedUntil = async () => Number(await hh.ctx.redis.hget(bucketKey, 'until'));
    await until('the bucket blocked after the 429', 10_000, async () => (await blockedUntil()) > 0);
    expect(await blockedUntil()).toBeGreaterThanOrEqual(refusedAt + 1900);
    const second = await createRun(url, `RL429-${Date.now()}-b`);
    expect(await hh.waitForStatus(second, ['completed', 'failed'], 20_000)).toBe('completed');
    expect(await hh.waitForStatus(first, ['completed', 'failed'], 20_000)).toBe('completed');
    // Every call after the 429, of either run, was sent only once the provider's two seconds had passed.
    for (const r of openai!.requests.slice(1)) expect(r.at - refusedAt).toBeGreaterThanOrEqual(1900);
    expect(await counter(hh, 'agent_model_rate_limited_total')).toBe(1);
    expect(await counter(hh, 'agent_rate_limit_waits_total')).toBeGreaterThanOrEqual(1);
  }, 60_000);
});
