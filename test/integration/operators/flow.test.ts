/**
 * Flow control for operators, over the real API: agentctl reads each tenant's line and changes a
 * weight or a limit at run time, recorded under the authenticated operator; a bad value is a 400
 * naming the field with nothing written; the console's flow page in headless Chromium shows the
 * lines and a server-rendered SVG plot of a rate limit's token rate against its limit. A tenant-scoped
 * operator's view and page hold its tenants' lines without the share, the agents' slots or the fleet's,
 * which count the other tenants' runs.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { createHarness, type Harness, sampleTicket } from '../../../testkit/harness.js';
import { startRun } from '../../../src/producer/intake.js';
import { loadConfig } from '../../../src/config/config.js';
import type { FlowView, ScopedFlowView } from '../../../src/flow/view.js';
import { agentctl, call, OPERATOR_TOKEN, operatorHarness } from './support.js';

const CHROMIUM = '/usr/bin/chromium';
let h: Harness & { url: string };

beforeAll(async () => {
  h = await operatorHarness('flowops', {
    FLOW_CONTROL: 'true',
    FLOW_TENANT_CONCURRENCY: '1',
    MODEL_RATE_LIMITS: JSON.stringify([{ provider: 'scripted', rpm: 600, tpm: 100000 }]),
  });
});
afterAll(async () => {
  await h.close();
});

const ctl = (...args: string[]) => agentctl(h.url)(...args);

describe('flow control for operators', () => {
  it('agentctl reads the lines and changes a weight and a limit, recorded with who changed them', async () => {
    for (let i = 0; i < 3; i++)
      await startRun(h.ctx, { tenant: 'acme', ticket: sampleTicket(`FLOW-${i}`) }, `flow-${i}`);
    const changed = await ctl('flow', 'tenant', 'acme', '--weight', '3', '--limit', '5', '--max-waiting', '7');
    expect(changed.code).toBe(0);
    expect(JSON.parse(changed.out)).toMatchObject({
      tenant: 'acme',
      weight: 3,
      limit: 5,
      maxWaiting: 7,
      by: 'operator',
    });
    const read = await ctl('flow');
    expect(read.code).toBe(0);
    const view = JSON.parse(read.out) as FlowView;
    // The line (all admitted once the limit went to 5) against the most it may hold before a new run is refused.
    expect(view.tenants.find((t) => t.tenant === 'acme')).toMatchObject({
      weight: 3,
      limit: 5,
      waiting: 0,
      maxWaiting: 7,
    });
    expect(view.changes.slice(0, 3).map((c) => [c.who, c.what, c.to])).toEqual([
      ['operator', 'max_waiting', '7'],
      ['operator', 'limit', '5'],
      ['operator', 'weight', '3'],
    ]);
  });

  it('refuses a bad value naming the field, and writes nothing', async () => {
    const before = await h.ctx.redis.llen(h.ctx.keys.flow().audit);
    const bad = await call(h.url, 'PUT', '/v1/flow/tenants/acme', { weight: 0 });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toMatch(/weight/);
    expect((await call(h.url, 'PUT', '/v1/flow/tenants/acme', { limit: -1 })).status).toBe(400);
    // A weight so small that a turn's stride leaves exact arithmetic (1 / 1e-300): refused, the field named.
    const settings = await h.ctx.redis.hgetall(h.ctx.keys.flow().settings);
    for (const weight of [1e-300, 5e-324, 0.0001]) {
      const tiny = await call(h.url, 'PUT', '/v1/flow/tenants/acme', { weight });
      expect(tiny.status).toBe(400);
      expect(JSON.stringify(tiny.body)).toMatch(/"path":"weight"/);
    }
    expect(await h.ctx.redis.hgetall(h.ctx.keys.flow().settings)).toEqual(settings);
    expect(await h.ctx.redis.llen(h.ctx.keys.flow().audit)).toBe(before);
  });

  it("an agent's limit names an agent as agents are named: a tenant-shaped name no agent can have is a 400", async () => {
    const before = await h.ctx.redis.llen(h.ctx.keys.flow().audit);
    const settings = await h.ctx.redis.hgetall(h.ctx.keys.flow().settings);
    for (const name of ['Support', '9lives']) {
      const bad = await call(h.url, 'PUT', `/v1/flow/agents/${name}`, { limit: 2 });
      expect(bad.status, name).toBe(400);
      expect(JSON.stringify(bad.body)).toMatch(/"path":"agent"/);
      expect(JSON.stringify(bad.body)).not.toContain(name);
    }
    expect(await h.ctx.redis.hgetall(h.ctx.keys.flow().settings)).toEqual(settings);
    expect(await h.ctx.redis.llen(h.ctx.keys.flow().audit)).toBe(before);
    // The listing's agent filter takes the same names.
    const listed = await call(h.url, 'GET', '/v1/runs?agent=Support');
    expect(listed.status).toBe(400);
    expect(JSON.stringify(listed.body)).toMatch(/"path":"agent"/);
    // At boot, a FLOW_AGENT_LIMITS key that is no agent's name is refused, naming the setting.
    expect(() => loadConfig({ FLOW_AGENT_LIMITS: JSON.stringify({ Support: 1 }) })).toThrow(/FLOW_AGENT_LIMITS/);
    expect(loadConfig({ FLOW_AGENT_LIMITS: JSON.stringify({ support: 1 }) }).FLOW_AGENT_LIMITS).toEqual({ support: 1 });
  });

  it.skipIf(!existsSync(CHROMIUM))('shows each line and the rate limit plot in the browser', async () => {
    await h.ctx.rates!.settle(h.ctx.rates!.bucketFor('scripted', undefined, 'acme')!, 0, 4000, Date.now());
    const { chromium } = await import('playwright-core');
    const browser: Browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'],
    });
    try {
      const context = await browser.newContext({ extraHTTPHeaders: { authorization: `Bearer ${OPERATOR_TOKEN}` } });
      const page = await context.newPage();
      const res = await page.goto(`${h.url}/console/flow`);
      expect(res?.status()).toBe(200);
      await expect(page.locator('#tenants tr[data-tenant="acme"] .share').textContent()).resolves.toMatch(/%/);
      await expect(page.locator('#tenants tr[data-tenant="acme"] .waiting').textContent()).resolves.toMatch(
        /^\d+ \/ 7$/,
      );
      const plot = page.locator('section.rate[data-bucket="scripted/*"] svg.rate-plot');
      expect(await plot.count()).toBe(1);
      expect(await plot.locator('polyline.used').getAttribute('points')).toMatch(/^[\d.]+,[\d.]+( [\d.]+,[\d.]+)+$/);
      expect(await plot.locator('line.limit').count()).toBe(1);
      expect(await page.locator('#changes li').first().textContent()).toMatch(/operator/);
    } finally {
      await browser.close();
    }
  });
});

describe('flow control for a tenant-scoped operator', () => {
  /** Tom sees globex only. */
  const TOM = 'tom-flow-token-0123';
  let s: Harness & { url: string };
  beforeAll(async () => {
    // No worker: the admitted runs keep their slots, so every count below holds still.
    s = Object.assign(
      await createHarness('flowscope', {
        OPERATOR_TOKEN,
        OPERATORS: JSON.stringify([
          {
            name: 'tom',
            tokenSha256: createHash('sha256').update(TOM).digest('hex'),
            role: 'operator',
            tenants: ['globex'],
          },
        ]),
        FLOW_CONTROL: 'true',
        FLOW_TENANT_CONCURRENCY: '2',
      }),
      { url: '' },
    );
    s.url = (await s.startApi()).url;
    for (let i = 0; i < 3; i++)
      await startRun(s.ctx, { tenant: 'acme', ticket: sampleTicket(`SCOPE-A-${i}`) }, `scope-a-${i}`);
    await startRun(s.ctx, { tenant: 'globex', ticket: sampleTicket('SCOPE-G-0') }, 'scope-g-0');
  });
  afterAll(async () => {
    await s.close();
  });
  const page = async (token: string) =>
    (await fetch(`${s.url}/console/flow`, { headers: { authorization: `Bearer ${token}` } })).text();

  it('GET /v1/flow: its lines without the share, no agents and no fleet; an operator of every tenant gets them all', async () => {
    const whole = await call<FlowView>(s.url, 'GET', '/v1/flow');
    expect(whole.status).toBe(200);
    expect(whole.body.fleet.held).toBe(3);
    expect(whole.body.agents).toEqual([expect.objectContaining({ agent: 'support', held: 3 })]);
    expect(whole.body.tenants.map((t) => [t.tenant, t.held, t.waiting, t.share])).toEqual([
      ['acme', 2, 1, 0.5],
      ['globex', 1, 0, 0.5],
    ]);
    const tom = await call<ScopedFlowView & Record<string, unknown>>(s.url, 'GET', '/v1/flow', undefined, TOM);
    expect(tom.status).toBe(200);
    expect(tom.body).not.toHaveProperty('fleet');
    expect(tom.body).not.toHaveProperty('agents');
    expect(tom.body.tenants).toEqual([
      {
        tenant: 'globex',
        waiting: 0,
        maxWaiting: 10_000,
        oldestWaitingMs: 0,
        held: 1,
        admitted: expect.any(Number),
        weight: 1,
        limit: 2,
      },
    ]);
  });

  it("the console's flow page: its line without the share column, no agents and no fleet", async () => {
    const whole = await page(OPERATOR_TOKEN);
    expect(whole).toMatch(/<span id="fleet-held">fleet 3 at work<\/span>/);
    expect(whole).toContain('<table id="agents">');
    expect(whole).toMatch(/<tr data-tenant="globex">.*<td class="share">50 %<\/td>/s);
    const tom = await page(TOM);
    expect(tom).toMatch(/<p id="flow-state">on<\/p>/);
    expect(tom).toMatch(/<tr data-tenant="globex">.*<td class="held">1 \/ 2<\/td>/s);
    for (const hidden of ['data-tenant="acme"', 'fleet-held', 'id="agents"', 'class="share"', '<th>share</th>'])
      expect(tom).not.toContain(hidden);
  });
});
