/**
 * Retry latency, measured (no assertion on time: figures go to the README notes).
 * Off unless RETRY_BENCH=1:
 *
 *   RETRY_BENCH=1 npx vitest run test/e2e/retryLatency.test.ts
 *
 * N runs stop `budget_exceeded` after an email; each is retried (steps: 1) one after
 * the other: the POST's latency, and the time from the request to `completed`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSpec } from '../../src/producer/intake.js';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { call, email, final, OPERATOR_TOKEN, turn } from '../integration/operators/support.js';
import { until } from '../../testkit/until.js';

describe.skipIf(process.env.RETRY_BENCH !== '1')('retry latency', () => {
  let h: Harness & { url: string };
  beforeAll(async () => {
    const x = await createHarness('retry-bench', { OPERATOR_TOKEN });
    await x.startWorker();
    const { url } = await x.startApi();
    h = Object.assign(x, { url });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('retries N stopped runs one after the other', async () => {
    const N = Number(process.env.RETRY_BENCH_RUNS ?? 40);
    const ids: string[] = [];
    for (let i = 0; i < N; i++) {
      const spec = buildSpec(
        h.ctx,
        {
          tenant: 'acme',
          ticket: sampleTicket(`RB-${i}-${Date.now()}`),
          agent: { model: 'scripted', script: [turn([email]), final] },
          budget: { maxSteps: 1 },
        },
        Date.now(),
      );
      await h.ctx.store.create(spec, Date.now());
      ids.push(spec.runId);
    }
    for (const id of ids) await h.waitForStatus(id, ['budget_exceeded']);
    const post: number[] = [];
    const done: number[] = [];
    for (const id of ids) {
      const t0 = performance.now();
      expect((await call(h.url, 'POST', `/v1/runs/${id}/retry`, { steps: 1 })).status).toBe(200);
      post.push(performance.now() - t0);
      const completed = async () => (await h.ctx.redis.hget(h.ctx.keys.run(id).run, 'status')) === 'completed';
      await until(`run ${id} completed`, 30_000, completed, 2);
      done.push(performance.now() - t0);
    }
    const q = (a: number[], p: number) => [...a].sort((x, y) => x - y)[Math.floor(p * (a.length - 1))]!.toFixed(1);
    expect(h.sandbox.counts().byResource.emails.records).toBe(N);
    console.log(
      `retry latency, N=${N}: POST p50 ${q(post, 0.5)} ms, p95 ${q(post, 0.95)} ms; request to completed p50 ${q(done, 0.5)} ms, p95 ${q(done, 0.95)} ms`,
    );
  });
});
