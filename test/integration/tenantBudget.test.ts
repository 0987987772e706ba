/** A tenant's daily token budget is reserved before each model call, across runs. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { buildSpec } from '../../src/producer/intake.js';

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

describe('tenant daily budget, settled past its limit', () => {
  let small: Harness;
  beforeAll(async () => {
    small = await createHarness('tenantover', { TENANT_DAILY_TOKENS: '3000' });
    await small.startWorker();
  });
  afterAll(async () => {
    await small.close();
  });

  it("records a run's real spend even past the day's limit, and refuses the next call once over", async () => {
    // Step 1's reservation (~1.2k) fits; the model then reports 5,000 tokens: more than the whole day.
    const script = [
      {
        toolCalls: [{ name: 'read_ticket', args: {} }],
        usage: { promptTokens: 4900, completionTokens: 100 },
        transientFailures: 0,
      },
      { toolCalls: [], final: 'done', usage: { promptTokens: 10, completionTokens: 5 }, transientFailures: 0 },
    ];
    const startRun = async (id: string) => {
      const spec = buildSpec(
        small.ctx,
        { tenant: 'initech', ticket: sampleTicket(id), agent: { model: 'scripted', script } },
        Date.now(),
      );
      await small.ctx.store.create(spec, Date.now());
      return spec.runId;
    };
    const a = await startRun('TO-1');
    expect(await small.waitForStatus(a, ['completed', 'budget_exceeded', 'failed'])).toBe('budget_exceeded');
    const stateA = (await small.ctx.store.readState(a))!;
    expect(stateA.used.tokens).toBe(5000);
    expect(stateA.reason).toMatch(/^tenant_tokens: initech used 5000 \+ estimate \d+ > 3000 tokens today/);
    const b = await startRun('TO-2');
    expect(await small.waitForStatus(b, ['completed', 'budget_exceeded', 'failed'])).toBe('budget_exceeded');
    const stateB = (await small.ctx.store.readState(b))!;
    expect(stateB.used.tokens).toBe(0);
    expect(stateB.reason).toMatch(/^tenant_tokens: initech/);
    const day = new Date().toISOString().slice(0, 10);
    // The tenant's day holds exactly what both runs spent, past the limit.
    expect(Number(await small.ctx.redis.get(small.ctx.keys.tenantTokens('initech', day)))).toBe(
      stateA.used.tokens + stateB.used.tokens,
    );
  });
});
