/**
 * A real provider's failed attempt that reports no usage (here a stream cut after its 200, most of its answer sent) is
 * charged its bound, never 0 (attemptCharge, src/budget/policy.ts): the estimate's prompt tokens and the completion cap,
 * on every ceiling a charge goes to: the run's tokens and cost, the tenant's token day, the tenant's and the fleet's
 * money counters, the day report and agent_spend_total. The run's retries then stop on its money cap.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, sampleTicket, type Harness } from '../../../testkit/harness.js';
import { startOpenAIServer } from '../../../testkit/modelServers/openai.js';
import type { ModelServer } from '../../../testkit/modelServers/queue.js';
import { until } from '../../../testkit/until.js';
import { buildSpec } from '../../../src/producer/intake.js';
import { readBudget } from '../../../src/store/runRecord.js';

/** gpt-4o's shipped output price (µ$ per million): a cut attempt is charged at least the completion cap at it. */
const OUTPUT_PRICE = 10_000_000;
const CAP = 1024;

let h: Harness;
let openai: ModelServer;
beforeAll(async () => {
  openai = await startOpenAIServer();
  h = await createHarness('cut-charge', {
    OPENAI_BASE_URL: `${openai.url}/v1`,
    OPENAI_API_KEY: 'sk-test',
    OPENAI_MODEL: 'gpt-4o',
    MODEL_STREAMING: 'true',
    MODEL_MAX_ATTEMPTS: '6',
    MODEL_OUTAGE_MAX_MS: '0',
    COMPLETION_TOKEN_CAP: String(CAP),
    TENANT_DAILY_TOKENS: '1000000',
    TENANT_DAILY_COST: '1000000',
    FLEET_MONTHLY_COST: '1000000',
    SPEND_FLUSH_MS: '50',
  });
  await h.startWorker();
});
afterAll(async () => {
  await h.close();
  await openai.close();
});

const sum = (values: readonly { value: number }[]) => values.reduce((n, v) => n + v.value, 0);

describe('a failed attempt without usage', () => {
  it('a cut stream is charged its bound on the run, the tenant and the fleet, and the run stops on its cap', async () => {
    // Every answer is cut after 90 of its events: the provider sent most of its text (and bills it), no usage.
    openai.respond = () => ({
      kind: 'turn',
      text: 'x'.repeat(800),
      usage: { input: 4000, output: 800 },
      truncateAfterEvents: 90,
    });
    const maxCost = 30_000;
    const spec = buildSpec(
      h.ctx,
      { tenant: 'cut', ticket: sampleTicket('CUT-1'), agent: { model: 'openai' }, budget: { maxCost } },
      Date.now(),
    );
    await h.ctx.store.create(spec, Date.now());
    expect(await h.waitForStatus(spec.runId, ['completed', 'failed', 'budget_exceeded', 'needs_human'])).toBe(
      'budget_exceeded',
    );
    const state = (await h.ctx.store.readState(spec.runId))!;
    expect(state.reason).toMatch(/^cost: used \d+ \+ estimate \d+ > cap 30000 µ\$$/);
    const requests = openai.requests.filter((r) => r.body.stream === true).length;
    // Each cut attempt is charged at least the cap at the output price (10,240 µ$): two fit under 30,000, a third not.
    expect(requests).toBe(2);

    const b = await readBudget(h.ctx.redis, h.ctx.keys, spec.runId, ['costUsed', 'tokensUsed']);
    expect(b.tokensUsed).toBeGreaterThanOrEqual(requests * CAP);
    expect(b.costUsed).toBeGreaterThanOrEqual(requests * Math.ceil((CAP * OUTPUT_PRICE) / 1e6));
    expect(b.costUsed).toBeLessThanOrEqual(maxCost);

    // The tenant's token day keeps the attempts' charge (their reservations settled to it, not given back).
    const day = new Date().toISOString().slice(0, 10);
    expect(Number(await h.ctx.redis.get(h.ctx.keys.tenantTokens('cut', day)))).toBe(b.tokensUsed);
    // The money counters and the day report hold the same charge once the worker's batch is sent.
    const k = h.ctx.keys.spend('cut', 'support', day, day.slice(0, 7));
    const reported = async () =>
      Object.entries(await h.ctx.redis.hgetall(k.dayReport))
        .filter(([field]) => field.startsWith('cut '))
        .reduce((n, [, v]) => n + Number(v), 0);
    await until('the spend batch', 10_000, async () => (await reported()) === b.costUsed, 20);
    await until(
      'the leases given back',
      10_000,
      async () => Number(await h.ctx.redis.get(k.tenantDay)) === b.costUsed,
      20,
    );
    expect(Number(await h.ctx.redis.get(k.fleetMonth))).toBe(b.costUsed);
    const spend = await h.ctx.metrics.registry.getSingleMetric('agent_spend_total')?.get();
    expect(sum((spend?.values ?? []).filter((v) => v.labels.tenant === 'cut'))).toBe(b.costUsed);
  }, 60_000);
});
