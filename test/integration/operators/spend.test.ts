/**
 * Money for operators through the real entry points, on real Redis with a real worker: an agent's own default
 * maxCost (defineAgent budget) applies when POST /v1/runs gives none, a request's wins, LIMIT_MAX_COST bounds both
 * (a 400 naming budget.maxCost; an agent default above it stops the boot); GET /v1/runs and the console's runs list
 * show each run's cost; a run stopped by its maxCost is retried with more money over POST /v1/runs/:id/retry (refusals
 * name the field and write nothing) and goes on to its answer; the console's spend page plots each tenant's days
 * against the daily limit, a tenant-scoped operator seeing only its own.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent, defineReadTool } from '../../../src/index.js';
import { createContext } from '../../../src/server/buildContext.js';
import { loadConfig } from '../../../src/config/config.js';
import { ConfigError } from '../../../src/core/errors.js';
import type { EngineContext } from '../../../src/runs/engineContext.js';
import { readBudget } from '../../../src/store/runRecord.js';
import { createHarness, PRODUCER_TOKEN, type Harness } from '../../../testkit/harness.js';
import { call, OPERATOR_TOKEN } from './support.js';

/** At the scripted model's nominal price ($1 in, $2 out per million): 1000 × 1 + 500 × 2 = 2000 µ$ a turn. */
const usage = { promptTokens: 1000, completionTokens: 500 };
const TURN_COST = 2000;
/**
 * The agent's own cap: step 1 (estimate: its prompt and the 100-token completion cap, a few hundred µ$) fits, step 2's
 * estimate beside step 1's 2000 µ$ does not.
 */
const AGENT_MAX_COST = 2100;

const meteredDefinition = {
  name: 'metered',
  version: 'metered@1',
  input: z.object({ id: z.string() }).strict(),
  key: (i: { id: string }) => i.id,
  model: 'scripted',
  budget: { maxCost: AGENT_MAX_COST },
  instructions: () => 'Look, then answer.',
  tools: [
    defineReadTool({
      name: 'look',
      description: 'looks',
      args: z.object({}),
      execute: async () => ({ ok: true }),
    }),
  ],
  demoScript: () => [
    { toolCalls: [{ name: 'look', args: {} }], usage },
    { toolCalls: [{ name: 'look', args: {} }], usage },
    { final: 'done', usage },
  ],
};
const metered = defineAgent<{ id: string }>(meteredDefinition);

const sha = (t: string) => createHash('sha256').update(t).digest('hex');
const TOM = 'tom-spend-token-0123';
let h: Harness;
let ctx: EngineContext;
let url: string;

beforeAll(async () => {
  h = await createHarness('spendops', {
    OPERATOR_TOKEN,
    OPERATORS: JSON.stringify([{ name: 'tom', tokenSha256: sha(TOM), role: 'operator', tenants: ['acme'] }]),
    COMPLETION_TOKEN_CAP: '100',
    LIMIT_MAX_COST: '50000',
    TENANT_DAILY_COST: '1000000',
    TENANT_MONTHLY_COST: '20000000',
  });
  ctx = await createContext(h.cfg, 'spendops', { agents: [metered] });
  await h.startWorker({}, ctx);
  url = (await h.startApi(ctx)).url;
});
afterAll(async () => {
  await h.close();
});

const ENDED = ['completed', 'failed', 'budget_exceeded', 'needs_human', 'cancelled'];
let seq = 0;

async function create(tenant: string, budget?: { maxCost: number }) {
  return call<{ runId: string; fields?: { path: string }[] }>(
    url,
    'POST',
    '/v1/runs',
    { tenant, agent: 'metered', input: { id: `S-${++seq}-${Date.now()}` }, ...(budget ? { budget } : {}) },
    PRODUCER_TOKEN,
  );
}

const maxCostOf = async (runId: string) =>
  (await call<{ budget: { limits: { maxCost?: number } } }>(url, 'GET', `/v1/runs/${runId}`)).body.budget.limits
    .maxCost;
const status = async (runId: string) => (await ctx.store.readState(runId))!;
const page = async (path: string, token = OPERATOR_TOKEN) => {
  const res = await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${token}` } });
  return { status: res.status, html: await res.text() };
};

describe("an agent's own maxCost", () => {
  it('applies when the request gives none; a request within LIMIT_MAX_COST wins; above it, 400 naming the field', async () => {
    const byAgent = await create('acme');
    expect(byAgent.status).toBe(201);
    expect(await maxCostOf(byAgent.body.runId)).toBe(AGENT_MAX_COST);
    const asked = await create('acme', { maxCost: 9000 });
    expect(asked.status).toBe(201);
    expect(await maxCostOf(asked.body.runId)).toBe(9000);
    const over = await create('acme', { maxCost: 50_001 });
    expect(over.status).toBe(400);
    expect(over.body.fields).toEqual([expect.objectContaining({ path: 'budget.maxCost' })]);
  });

  it('above LIMIT_MAX_COST it stops the boot naming the agent; out of bounds, defineAgent refuses it', async () => {
    const cfg = loadConfig({ ...h.env, LIMIT_MAX_COST: '2000' });
    const boot = createContext(cfg, 'spendops-over', { agents: [metered] });
    await expect(boot).rejects.toBeInstanceOf(ConfigError);
    await expect(boot).rejects.toThrow(/agent 'metered' budget\.maxCost: 2100 is above LIMIT_MAX_COST \(2000\)/);
    for (const maxCost of [0, 1.5, -3])
      expect(() => defineAgent({ ...meteredDefinition, budget: { maxCost } })).toThrow(
        /agent 'metered': budget\.maxCost must be a whole number/,
      );
    expect(() => defineAgent({ ...meteredDefinition, budget: { maxTokens: 5 } as never })).toThrow(
      /budget\.maxTokens is not a budget of an agent/,
    );
  });
});

describe('a run stopped by its maxCost, retried with more money over HTTP', () => {
  let runId: string;

  it('stops before the call that would cross the cap', async () => {
    runId = (await create('retry')).body.runId;
    expect(await h.waitForStatus(runId, ENDED)).toBe('budget_exceeded');
    expect((await status(runId)).reason).toMatch(new RegExp(`^cost: used ${TURN_COST} \\+ estimate \\d+ > cap 2100`));
  });

  it('refuses a retry without more money, or past LIMIT_MAX_COST (400 naming cost), writing nothing', async () => {
    const before = await ctx.redis.hgetall(ctx.keys.run(runId).budget);
    const journal = (await ctx.store.transcript(runId)).length;
    const none = await call(url, 'POST', `/v1/runs/${runId}/retry`, { steps: 2 });
    expect(none.status).toBe(409);
    expect(none.body).toMatchObject({ error: 'extension_required', budget: 'cost' });
    const over = await call(url, 'POST', `/v1/runs/${runId}/retry`, { cost: 48_000 });
    expect(over.status).toBe(400);
    expect(over.body).toMatchObject({ error: 'invalid_request', fields: [{ path: 'cost' }] });
    const malformed = await call(url, 'POST', `/v1/runs/${runId}/retry`, { cost: -1 });
    expect(malformed.status).toBe(400);
    expect(malformed.body).toMatchObject({ fields: [{ path: 'cost' }] });
    expect(await ctx.redis.hgetall(ctx.keys.run(runId).budget)).toEqual(before);
    expect((await ctx.store.transcript(runId)).length).toBe(journal);
    expect((await status(runId)).status).toBe('budget_exceeded');
  });

  it('with more money the run goes on from its last commit to its answer', async () => {
    const res = await call<{ limits: { maxCost: number }; extension: { cost: number } }>(
      url,
      'POST',
      `/v1/runs/${runId}/retry`,
      { cost: 5000 },
    );
    expect(res.status).toBe(200);
    expect(res.body.limits.maxCost).toBe(AGENT_MAX_COST + 5000);
    expect(res.body.extension.cost).toBe(5000);
    expect(await maxCostOf(runId)).toBe(AGENT_MAX_COST + 5000);
    const retried = (await ctx.store.transcript(runId)).filter((e) => e.kind === 'operator').at(-1);
    expect(retried).toMatchObject({ action: 'retry', by: 'operator', detail: expect.stringMatching(/,cost=\+5000$/) });
    expect(await h.waitForStatus(runId, ENDED)).toBe('completed');
    expect((await readBudget(ctx.redis, ctx.keys, runId, ['costUsed'])).costUsed).toBe(3 * TURN_COST);
  });

  it("GET /v1/runs and the console's runs list show each run's cost", async () => {
    const list = await call<{ runs: { runId: string; cost: number }[] }>(url, 'GET', '/v1/runs?tenant=retry');
    expect(list.status).toBe(200);
    expect(list.body.runs.find((r) => r.runId === runId)?.cost).toBe(3 * TURN_COST);
    const { status: code, html } = await page('/console/runs?tenant=retry');
    expect(code).toBe(200);
    expect(html).toMatch(/<th>cost USD<\/th>/);
    const row = new RegExp(`<tr data-run="${runId}">.*?</tr>`, 's').exec(html)?.[0] ?? '';
    expect(row).toContain('<td class="cost" data-micros="6000">0.006000</td>');
  });
});

describe("the console's spend page", () => {
  it("plots each tenant's days against the daily limit; a tenant-scoped operator sees its own only", async () => {
    // Yesterday's report as a settled attempt would have left it (the day reports are what the page reads).
    const yesterday = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
    await ctx.redis.hset(
      ctx.keys.spendReports(yesterday, yesterday.slice(0, 7)).dayReport,
      'retry metered scripted/scripted',
      '4000',
    );
    const { status: code, html } = await page('/console/spend');
    expect(code).toBe(200);
    const section = /<section class="spend" data-tenant="retry">.*?<\/section>/s.exec(html)?.[0] ?? '';
    expect(section).toMatch(/<svg class="spend-plot" role="img" aria-label="retry: spend per UTC day from /);
    // Yesterday and today: one polyline of two points, today's 6000 µ$ higher (smaller y) than yesterday's 4000.
    const points = /<polyline class="spent" points="([^"]+)"/.exec(section)?.[1]?.split(' ') ?? [];
    expect(points).toHaveLength(2);
    const [y1, y2] = points.map((p) => Number(p.split(',')[1]));
    expect(y2!).toBeLessThan(y1!);
    expect(section).toMatch(/<line class="limit"[^>]*stroke-dasharray/);
    expect(section).toContain('daily limit $1.000000');
    const row = /<tr data-tenant="retry">.*?<\/tr>/s.exec(html)?.[0] ?? '';
    expect(row).toContain('<td class="today">$0.006000 of $1.000000</td>');
    expect(html).toMatch(/<p id="fleet-month">fleet this month \([\d-]+\): \$0\.\d{6} \(no limit\)<\/p>/);
    const tom = await page('/console/spend', TOM);
    expect(tom.status).toBe(200);
    expect(tom.html).not.toContain('data-tenant="retry"');
    expect(tom.html).not.toContain('id="fleet-month"');
  });
});
