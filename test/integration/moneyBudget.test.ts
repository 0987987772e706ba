/**
 * Money budgets through real steps (src/core/prices.ts, src/budget/spend.ts): each attempt's cost from its real
 * usage on the vendors' own wire (the OpenAI and Anthropic stand-ins count the calls), charged with the tokens in
 * the step's scripts (costUsed), retries included; a run whose next attempt could cross its maxCost stops before
 * the call; a price change applies only to later attempts; the tenant's daily money holds across runs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { startOpenAIServer } from '../../testkit/modelServers/openai.js';
import { startAnthropicServer } from '../../testkit/modelServers/anthropic.js';
import type { ModelServer } from '../../testkit/modelServers/queue.js';
import { buildSpec } from '../../src/producer/intake.js';
import type { DecisionEntry } from '../../src/core/journal.js';
import { readBudget } from '../../src/store/runRecord.js';
import { until } from '../../testkit/until.js';

const OPERATOR_TOKEN = 'operator-token-for-money-tests';
let h: Harness;
let openai: ModelServer;
let anthropic: ModelServer;
/** A scripted price change, a few seconds after the harness starts: attempts before it keep the nominal price. */
const changeAt = Date.now() + 4000;

beforeAll(async () => {
  [openai, anthropic] = await Promise.all([startOpenAIServer(), startAnthropicServer()]);
  h = await createHarness('money', {
    OPENAI_BASE_URL: `${openai.url}/v1`,
    OPENAI_API_KEY: 'sk-test',
    OPENAI_MODEL: 'gpt-4o-mini',
    ANTHROPIC_BASE_URL: `${anthropic.url}/v1`,
    ANTHROPIC_API_KEY: 'ak-test',
    ANTHROPIC_MODEL: 'claude-sonnet-4-5',
    MODEL_PRICES: JSON.stringify([
      { provider: 'scripted', from: new Date(changeAt).toISOString(), input: 10_000_000, output: 20_000_000 },
    ]),
    TENANT_DAILY_COST: '100000',
    OPERATOR_TOKEN,
  });
  await h.startWorker();
});
afterAll(async () => {
  await h.close();
  await Promise.all([openai, anthropic].map((s) => s.close()));
});

type Model = 'openai' | 'anthropic' | 'scripted';

async function start(
  model: Model,
  id: string,
  opts: { maxCost?: number; script?: unknown[]; tenant?: string } = {},
): Promise<string> {
  const spec = buildSpec(
    h.ctx,
    {
      tenant: opts.tenant ?? 'acme',
      ticket: sampleTicket(id),
      agent: { model, ...(opts.script ? { script: opts.script as never } : {}) },
      ...(opts.maxCost ? { budget: { maxCost: opts.maxCost } } : {}),
    },
    Date.now(),
  );
  await h.ctx.store.create(spec, Date.now());
  return spec.runId;
}

async function decisions(runId: string): Promise<DecisionEntry[]> {
  return (await h.ctx.store.transcript(runId)).filter((e): e is DecisionEntry => e.kind === 'decision');
}

const costUsed = async (runId: string) => (await readBudget(h.ctx.redis, h.ctx.keys, runId, ['costUsed'])).costUsed;
const ended = ['completed', 'failed', 'budget_exceeded', 'needs_human'] as const;

describe('money budgets', () => {
  it("OpenAI's usage shape (cached tokens inside prompt_tokens) is charged exactly", async () => {
    openai.enqueue({ kind: 'turn', text: 'done', usage: { input: 1000, output: 200, cached: 400 } });
    const run = await start('openai', 'M-1', { tenant: 'oa' });
    expect(await h.waitForStatus(run, [...ended])).toBe('completed');
    // 600 × $0.15 + 400 × $0.075 + 200 × $0.60 per million = 240 µ$.
    expect(await costUsed(run)).toBe(240);
    const [d] = await decisions(run);
    expect(d!.usage).toEqual({ promptTokens: 1000, completionTokens: 200, cachedInputTokens: 400 });
    expect(d!.cost).toEqual({ micros: 240, prices: [expect.stringMatching(/^openai\/gpt-4o-mini@/)] });
  });

  it("Anthropic's usage shape (cache reads and writes beside input_tokens) is charged exactly", async () => {
    anthropic.enqueue({
      kind: 'turn',
      text: 'done',
      usage: { input: 1000, output: 100, cached: 500, cacheWrite: 200 },
    });
    const run = await start('anthropic', 'M-2', { tenant: 'an' });
    expect(await h.waitForStatus(run, [...ended])).toBe('completed');
    // 300 × $3 + 500 × $0.30 + 200 × $3.75 + 100 × $15 per million = 3300 µ$.
    expect(await costUsed(run)).toBe(3300);
    const [d] = await decisions(run);
    expect(d!.usage).toEqual({
      promptTokens: 1000,
      completionTokens: 100,
      cachedInputTokens: 500,
      cacheWriteTokens: 200,
    });
  });

  it('a run whose next attempt could cross maxCost stops before the call, naming the cost', async () => {
    const before = openai.requests.length;
    // Step 1 costs 1000 × 0.15 + 1000 × 0.60 = 750 µ$; step 2's estimate (its input at $0.15 and the 1024-token
    // completion cap at $0.60, over 614 µ$) would cross the 1200 µ$ cap: not sent.
    openai.enqueue({
      kind: 'turn',
      toolCalls: [{ name: 'read_ticket', args: {} }],
      usage: { input: 1000, output: 1000 },
    });
    const run = await start('openai', 'M-3', { maxCost: 1200, tenant: 'capped' });
    expect(await h.waitForStatus(run, [...ended])).toBe('budget_exceeded');
    expect(openai.requests.length - before).toBe(1);
    const state = (await h.ctx.store.readState(run))!;
    expect(state.reason).toMatch(/^cost: used 750 \+ estimate \d+ > cap 1200 µ\$$/);
    expect(await costUsed(run)).toBe(750);
  });

  it('retries are charged each time: failed attempts cost what they reported', async () => {
    const script = [
      {
        toolCalls: [],
        final: 'done',
        usage: { promptTokens: 200, completionTokens: 20 },
        transientFailures: 2,
        failureUsage: { promptTokens: 100, completionTokens: 10 },
      },
    ];
    const run = await start('scripted', 'M-4', { script, tenant: 'retries' });
    expect(await h.waitForStatus(run, [...ended])).toBe('completed');
    const [d] = await decisions(run);
    expect(d!.attempts).toBe(3);
    // At the nominal price ($1 in, $2 out): two failures of 120 µ$ and a success of 240 µ$.
    expect(d!.cost?.micros).toBe(480);
    expect(await costUsed(run)).toBe(480);
    expect(Date.now()).toBeLessThan(changeAt); // this run was priced before the change
  });

  it('a price change applies only to attempts after it; what was charged before keeps its price', async () => {
    const script = [{ toolCalls: [], final: 'done', usage: { promptTokens: 100, completionTokens: 10 } }];
    const early = await start('scripted', 'M-5', { script, tenant: 'prices' });
    expect(await h.waitForStatus(early, [...ended])).toBe('completed');
    const [e] = await decisions(early);
    expect(e!.cost?.micros).toBe(120);
    await until('the price change in effect', 10_000, () => Date.now() > changeAt);
    const late = await start('scripted', 'M-6', { script, tenant: 'prices' });
    expect(await h.waitForStatus(late, [...ended])).toBe('completed');
    const [l] = await decisions(late);
    // 100 × $10 + 10 × $20 per million = 1200 µ$, at the new version.
    expect(l!.cost?.micros).toBe(1200);
    expect(l!.cost?.prices[0]).not.toBe(e!.cost?.prices[0]);
    expect(await costUsed(early)).toBe(120);
    expect((await decisions(early))[0]!.cost?.micros).toBe(120);
  });

  it("the tenant's daily money: runs that add up past it stop before the call, the spend recorded", async () => {
    await until('the price change in effect', 10_000, () => Date.now() > changeAt);
    // 7000 × $10 + 500 × $20 per million = 80,000 µ$ for the first run; the second's estimate (the 1024-token cap
    // at $20 alone is 20,480 µ$) would pass the 100,000 µ$ day: refused before its call.
    const script = [{ toolCalls: [], final: 'done', usage: { promptTokens: 7000, completionTokens: 500 } }];
    const first = await start('scripted', 'M-7', { script, tenant: 'daily' });
    expect(await h.waitForStatus(first, [...ended])).toBe('completed');
    expect(await costUsed(first)).toBe(80_000);
    const second = await start('scripted', 'M-8', { script, tenant: 'daily' });
    expect(await h.waitForStatus(second, [...ended])).toBe('budget_exceeded');
    expect((await h.ctx.store.readState(second))!.reason).toMatch(
      /^cost: daily \(tenant today\) used 80000 \+ estimate \d+ > 100000 µ\$$/,
    );
    expect(await costUsed(second)).toBe(0);
    const day = new Date().toISOString().slice(0, 10);
    const keys = h.ctx.keys.spend('daily', 'support', day, day.slice(0, 7));
    expect(Number(await h.ctx.redis.get(keys.tenantDay))).toBe(80_000);
    expect(await h.ctx.redis.hgetall(keys.dayReport)).toMatchObject({ 'daily support scripted/scripted': '80000' });
    // What `agentctl spend` reads: the day's and the month's real spend by tenant, agent and model.
    const { url } = await h.startApi();
    const auth = { authorization: `Bearer ${OPERATOR_TOKEN}` };
    for (const period of [day, day.slice(0, 7)]) {
      const res = await fetch(`${url}/v1/spend?period=${period}`, { headers: auth });
      expect(res.status).toBe(200);
      const report = (await res.json()) as { lines: unknown[] };
      expect(report.lines).toContainEqual({
        tenant: 'daily',
        agent: 'support',
        model: 'scripted/scripted',
        micros: 80_000,
      });
    }
    for (const period of ['yesterday', '2026-99', '0000-00-00', '2026-02-30', '2026-00', '2026-13-01', '1969-12-31']) {
      const bad = await fetch(`${url}/v1/spend?period=${period}`, { headers: auth });
      expect(bad.status, period).toBe(400);
      expect(await bad.json()).toMatchObject({ fields: [{ path: 'period' }] });
    }
    expect((await fetch(`${url}/v1/spend?period=2024-02-29`, { headers: auth })).status).toBe(200);
  });
});
