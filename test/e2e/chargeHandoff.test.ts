/**
 * Failed model attempts count even when the step never reaches a decision:
 * a worker process retrying a failing model call is SIGTERMed mid-backoff and
 * hands the step back; the tokens its failed attempts were billed are charged
 * to the run (fenced) before the handoff, so the run's budget shows the true spend.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { spawnWorker } from '../../testkit/processes.js';
import { buildSpec } from '../../src/producer/intake.js';
import { until } from '../../testkit/until.js';

let h: Harness;
beforeAll(async () => {
  // No outage window: once a delivery's attempts are spent, the provider counts as unavailable at once.
  h = await createHarness('chargeoff', { MODEL_OUTAGE_MAX_MS: '0' });
});
afterAll(async () => {
  await h.close();
});

describe('failed attempts of a step handed back at SIGTERM', () => {
  it('are charged to the run before the handoff, and the next owner adds its own', async () => {
    const script = [
      // Every attempt fails, each billed 100 tokens.
      {
        toolCalls: [{ name: 'read_ticket', args: {} }],
        usage: { promptTokens: 10, completionTokens: 5 },
        transientFailures: 20,
        failureUsage: { promptTokens: 100, completionTokens: 0 },
      },
    ];
    const spec = buildSpec(
      h.ctx,
      { tenant: 'acme', ticket: sampleTicket('CH-1'), agent: { model: 'scripted', script } },
      Date.now(),
    );
    await h.ctx.store.create(spec, Date.now());
    // Long backoffs and many attempts: the worker is inside the retry loop when the signal comes.
    const w = await spawnWorker({
      ...h.env,
      WORKER_METRICS_PORT: '0',
      MODEL_MAX_ATTEMPTS: '20',
      RETRY_BASE_MS: '1500',
      RETRY_MAX_MS: '1500',
    });
    const retries = () => w.lines.filter((l) => l.includes('"code":"model_retry"')).length;
    await until('two model retries', 20_000, () => retries() >= 2, 10);
    w.child.kill('SIGTERM');
    expect((await w.exited).code).toBe(0);
    expect(w.lines.some((l) => l.includes('"code":"sigterm_handoff"'))).toBe(true);
    // Each logged retry followed one failed attempt; the one in flight at the signal had not failed yet.
    const failedBeforeHandoff = retries();
    expect(Number(await h.ctx.redis.hget(h.ctx.keys.run(spec.runId).budget, 'tokensUsed'))).toBe(
      100 * failedBeforeHandoff,
    );
    // The next owner (4 attempts here) spends its own four, charged, and with no outage window left parks the run.
    await h.startWorker();
    expect(await h.waitForStatus(spec.runId, ['completed', 'failed', 'budget_exceeded', 'needs_human'])).toBe(
      'needs_human',
    );
    const state = (await h.ctx.store.readState(spec.runId))!;
    expect(state.reason).toMatch(/^provider_unavailable: scripted/);
    expect(state.used.tokens).toBe(100 * failedBeforeHandoff + 400);
  }, 60_000);
});
