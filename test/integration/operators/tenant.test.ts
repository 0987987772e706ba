/** Per-tenant isolation: a tenant's token creates and sees only its own runs; another tenant's run looks unknown. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, sampleTicket } from '../../../testkit/harness.js';
import { runIdFor } from '../../../src/store/keys.js';
import { call, final, OPERATOR_TOKEN, operatorHarness } from './support.js';

const ACME = 'acme-tenant-token-1';
const GLOBEX = 'globex-tenant-token-2';
const PRODUCER = 'producer-token-for-tests';

let h: Harness & { url: string };
let acmeRun: string;
let globexRun: string;

async function create(tenant: string, token: string, ticketId: string) {
  return call<{ runId: string; created: boolean }>(
    h.url,
    'POST',
    '/v1/runs',
    {
      tenant,
      ticket: sampleTicket(ticketId),
      agent: { model: 'scripted', script: [final] },
    },
    token,
  );
}

beforeAll(async () => {
  h = await operatorHarness('tenant', {
    TENANT_TOKENS: JSON.stringify({ acme: ACME, globex: GLOBEX }),
    PRODUCER_TOKEN: PRODUCER,
  });
  const a = await create('acme', ACME, `ISO-A-${Date.now()}`);
  const g = await create('globex', GLOBEX, `ISO-G-${Date.now()}`);
  expect([a.status, g.status]).toEqual([201, 201]);
  acmeRun = a.body.runId;
  globexRun = g.body.runId;
  expect(await h.waitForStatus(acmeRun, ['completed', 'failed'])).toBe('completed');
  expect(await h.waitForStatus(globexRun, ['completed', 'failed'])).toBe('completed');
});
afterAll(async () => {
  await h.close();
});

async function events(runId: string, token: string | undefined): Promise<{ status: number; text: string }> {
  const res = await fetch(`${h.url}/v1/runs/${runId}/events`, {
    headers: token ? { authorization: `Bearer ${token}` } : {},
  });
  return { status: res.status, text: await res.text() };
}

describe('tenant isolation', () => {
  it("a tenant token reads its own run, and another tenant's run is 404 exactly like an unknown one", async () => {
    const own = await call<{ runId: string; tenant: string; status: string }>(
      h.url,
      'GET',
      `/v1/runs/${acmeRun}`,
      undefined,
      ACME,
    );
    expect(own.status).toBe(200);
    expect(own.body).toMatchObject({ runId: acmeRun, tenant: 'acme', status: 'completed' });

    const other = await call(h.url, 'GET', `/v1/runs/${globexRun}`, undefined, ACME);
    const unknown = await call(h.url, 'GET', '/v1/runs/r_does_not_exist', undefined, ACME);
    expect(other.status).toBe(404);
    expect(unknown.status).toBe(404);
    expect(Object.keys(other.body).sort()).toEqual(Object.keys(unknown.body).sort());
    expect(JSON.stringify(other.body)).not.toContain('globex');

    expect((await call(h.url, 'GET', `/v1/runs/${acmeRun}`, undefined, GLOBEX)).status).toBe(404);
    expect((await call(h.url, 'GET', `/v1/runs/${globexRun}`, undefined, GLOBEX)).status).toBe(200);
  });

  it('events follow the same rule', async () => {
    const own = await events(acmeRun, ACME);
    expect(own.status).toBe(200);
    expect(own.text).toContain('event: status_changed');
    const other = await events(globexRun, ACME);
    expect(other.status).toBe(404);
    expect(other.text).not.toContain('event:');
    expect((await events(acmeRun, undefined)).status).toBe(401);
  });

  it('the HTML run page too', async () => {
    const page = (runId: string, token: string) =>
      fetch(`${h.url}/runs/${runId}`, { headers: { authorization: `Bearer ${token}` } });
    expect((await page(acmeRun, ACME)).status).toBe(200);
    const other = await page(globexRun, ACME);
    expect(other.status).toBe(404);
    expect(await other.text()).not.toContain(globexRun);
  });

  it('operator and producer tokens see every run; no token or a wrong one is 401', async () => {
    for (const token of [OPERATOR_TOKEN, PRODUCER]) {
      for (const runId of [acmeRun, globexRun])
        expect((await call(h.url, 'GET', `/v1/runs/${runId}`, undefined, token)).status).toBe(200);
    }
    expect((await call(h.url, 'GET', `/v1/runs/${acmeRun}`, undefined, '')).status).toBe(401);
    expect((await call(h.url, 'GET', `/v1/runs/${acmeRun}`, undefined, 'not-a-token')).status).toBe(401);
  });

  it('a tenant token creates runs only for its tenant and reaches no operator route', async () => {
    const ticketId = `ISO-X-${Date.now()}`;
    const forged = await create('globex', ACME, ticketId);
    expect(forged.status).toBe(403);
    expect(await h.ctx.store.exists(runIdFor('globex', 'support', ticketId))).toBe(false);
    // The same request with the right tenant works (nothing was reserved by the refused one).
    expect((await create('acme', ACME, ticketId)).status).toBe(201);
    expect((await create('acme', '', `ISO-Y-${Date.now()}`)).status).toBe(401);

    expect((await call(h.url, 'GET', '/v1/approvals', undefined, ACME)).status).toBe(401);
    expect((await call(h.url, 'GET', '/v1/reconciliations', undefined, ACME)).status).toBe(401);
    expect((await call(h.url, 'POST', `/v1/runs/${acmeRun}/cancel`, {}, ACME)).status).toBe(401);
    expect(
      (await fetch(`${h.url}/admin/queues/api/queues`, { headers: { authorization: `Bearer ${ACME}` } })).status,
    ).toBe(401);
  });
});
