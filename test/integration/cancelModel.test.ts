/**
 * Cancel stops the model too, over real HTTP with a worker and the local OpenAI server answering 503: a run
 * queued behind a provider outage, cancelled through the API, ends `cancelled` at once (its delayed step job is
 * woken) and the server sees no model request after the cancel, whether the step waits out a Retry-After or is
 * inside its retry loop.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, producerAuth, sampleTicket, type Harness } from '../../testkit/harness.js';
import { startOpenAIServer, type ModelServer } from '../../testkit/modelServers/openai.js';
import { until } from '../../testkit/until.js';

const OPERATOR_TOKEN = 'operator-token-for-cancel-tests';
let h: Harness;
let url: string;
let openai: ModelServer;

beforeAll(async () => {
  openai = await startOpenAIServer();
  h = await createHarness('cancelmodel', {
    OPENAI_BASE_URL: `${openai.url}/v1`,
    OPENAI_API_KEY: 'sk-test',
    OPENAI_MODEL: 'gpt-4o-mini',
    OPERATOR_TOKEN,
    MODEL_MAX_ATTEMPTS: '50',
    RETRY_BASE_MS: '100',
    RETRY_MAX_MS: '100',
  });
  await h.startWorker();
  url = (await h.startApi()).url;
});
afterAll(async () => {
  await h.close();
  await openai.close();
});

let seq = 0;
async function startRun(): Promise<{ runId: string; marker: string }> {
  const marker = `CANCEL-${++seq}-${Date.now()}`;
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
  return { runId: ((await res.json()) as { runId: string }).runId, marker };
}

const requestsFor = (marker: string) => openai.requests.filter((r) => JSON.stringify(r.body).includes(marker)).length;

async function cancel(runId: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}/v1/runs/${runId}/cancel`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${OPERATOR_TOKEN}` },
    body: '{}',
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const honoured = async (at: string) =>
  ((await h.ctx.metrics.registry.getSingleMetric('agent_cancels_before_model_total')?.get())?.values ?? [])
    .filter((v) => v.labels.at === at)
    .reduce((n, v) => n + v.value, 0);

describe('cancel stops the model', () => {
  it('a run waiting out an outage (Retry-After 30 s) ends cancelled at once, with no model request after the cancel', async () => {
    openai.fallback = { kind: 'error', status: 503, retryAfter: '30' };
    const { runId, marker } = await startRun();
    await until('the first model request', 10_000, () => requestsFor(marker) >= 1);
    // The step moved its job to the delayed set for the provider's 30 s.
    await until('the step job delayed', 10_000, async () =>
      (await h.ctx.queues.forRun(runId).getJob(`${runId}.s1`))?.isDelayed(),
    );
    const before = await honoured('model_attempt');
    const sent = requestsFor(marker);

    const started = Date.now();
    const res = await cancel(runId);
    expect(res).toMatchObject({ status: 202, body: { cancelled: 'at_next_commit' } });
    expect(await h.waitForStatus(runId, ['cancelled'], 5000)).toBe('cancelled');
    expect(Date.now() - started).toBeLessThan(5000);
    // No job of the run is left: nothing can ask the model again.
    await h.untilNoJob(runId);
    expect(requestsFor(marker)).toBe(sent);
    expect(await honoured('model_attempt')).toBe(before + 1);
    expect((await h.ctx.store.readState(runId))?.reason).toMatch(/^cancelled_by_operator: requested by /);
  });

  it('a run inside its model retry loop (503s, no Retry-After) ends cancelled before its next attempt', async () => {
    openai.fallback = { kind: 'error', status: 503 };
    const { runId, marker } = await startRun();
    await until('three model requests', 10_000, () => requestsFor(marker) >= 3);
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')).toBe('queued');

    const res = await cancel(runId);
    expect(res.status).toBe(202);
    const sent = requestsFor(marker);
    expect(await h.waitForStatus(runId, ['cancelled'], 5000)).toBe('cancelled');
    await h.untilNoJob(runId);
    // At most the attempt already on the wire when the cancel was recorded.
    expect(requestsFor(marker)).toBeLessThanOrEqual(sent + 1);
  });
});
