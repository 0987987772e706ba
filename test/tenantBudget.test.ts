/** A tenant's daily token budget is reserved before each model call, across runs. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, sampleTicket, type Harness } from './support/harness.js';
import { buildSpec } from '../src/producer/runs.js';

let h: Harness;
beforeAll(async () => {
  h = await createHarness('tenant', { TENANT_DAILY_TOKENS: '9000' });
  await h.startWorker();
});
afterAll(async () => {
  await h.close();
});

async function start(tenant: string, id: string): Promise<string> {
  const spec = buildSpec(h.ctx, { tenant, ticket: sampleTicket(id) }, Date.now());
  await h.ctx.store.create(spec, Date.now());
  return spec.runId;
}

describe('tenant daily budget', () => {
  it('many cheap runs cannot add up past the tenant day: the next call is not made', async () => {
    const a = await start('acme', 'TB-1');
    expect(await h.waitForStatus(a, ['completed', 'budget_exceeded'])).toBe('completed');
    const b = await start('acme', 'TB-2');
    expect(await h.waitForStatus(b, ['completed', 'budget_exceeded'])).toBe('budget_exceeded');
    expect((await h.ctx.store.readState(b))?.reason).toMatch(/^tenant_tokens: acme/);
    const day = new Date().toISOString().slice(0, 10);
    const used = Number(await h.ctx.redis.get(h.ctx.keys.tenantTokens('acme', day)));
    const runTokens = (await h.ctx.store.readState(a))!.used.tokens + (await h.ctx.store.readState(b))!.used.tokens;
    // Settled reservations equal what the runs were charged, and stay within the day's budget.
    expect(used).toBe(runTokens);
    expect(used).toBeLessThanOrEqual(9000);
    const other = await start('globex', 'TB-3');
    expect(await h.waitForStatus(other, ['completed', 'budget_exceeded'])).toBe('completed');
  });
});
