/**
 * A 400 tells a tenant what is wrong with its request, never how the deployment is configured: an unknown agent
 * names no other agent, a model it may not use names no setting or source. The producer and operators, who run the
 * deployment, get the list and the hint.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, PRODUCER_TOKEN, sampleTicket, type Harness } from '../../testkit/harness.js';

const ACME = 'acme-tenant-token';
const GLOBEX = 'globex-tenant-token';
let h: Harness;
let url: string;
beforeAll(async () => {
  h = await createHarness('tenantRefusals', {
    TENANT_TOKENS: JSON.stringify({ acme: ACME, globex: GLOBEX }),
    TENANT_MODELS: JSON.stringify({ globex: { '*': { provider: 'scripted' } } }),
  });
  url = (await h.startApi()).url;
});
afterAll(async () => {
  await h.close();
});

async function send(method: string, path: string, token: string, body: unknown) {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as { fields: { path: string; message: string }[] } };
}
const messages = (r: { body: { fields: { message: string }[] } }) => r.body.fields.map((f) => f.message).join(' | ');

describe('refusals to a tenant', () => {
  const ghost = { tenant: 'acme', agent: 'ghost', input: {} };
  const schedule = { ...ghost, cron: '0 3 * * *' };
  const model = { tenant: 'acme', agent: 'support', input: sampleTicket('TR-1'), model: 'openai' };

  it('an unknown agent: the tenant learns it is unknown, not which agents the deployment runs', async () => {
    for (const [method, path, body] of [
      ['POST', '/v1/runs', ghost],
      ['PUT', '/v1/schedules/nightly', schedule],
      ['POST', '/v1/events', { tenant: 'acme', agent: 'ghost', key: 'order:1', payload: {} }],
    ] as const) {
      const tenant = await send(method, path, ACME, body);
      expect(tenant.status, path).toBe(400);
      expect(tenant.body.fields).toEqual([{ path: 'agent', message: "agent 'ghost' is not run by this deployment" }]);
      const producer = await send(method, path, PRODUCER_TOKEN, body);
      expect(producer.body.fields).toEqual([
        { path: 'agent', message: "agent 'ghost' is not run by this deployment (it runs: support)" },
      ]);
    }
  });

  it("a model other than the tenant's own: the tenant is told which provider it runs on, not the setting", async () => {
    const body = { tenant: 'globex', agent: 'support', input: sampleTicket('TR-2'), model: 'openai' };
    const tenant = await send('POST', '/v1/runs', GLOBEX, body);
    expect(tenant.status).toBe(400);
    expect(messages(tenant)).toBe(
      "tenant 'globex' runs agent 'support' on provider 'scripted'; leave model out or name that provider",
    );
    expect(messages(await send('POST', '/v1/runs', PRODUCER_TOKEN, body))).toMatch(/TENANT_MODELS\.globex/);
  });

  it('a provider that is not enabled: no setting, no source of the choice for a tenant', async () => {
    const tenant = await send('POST', '/v1/runs', ACME, model);
    expect(tenant.status).toBe(400);
    expect(messages(tenant)).toBe("provider 'openai' is not enabled");
    const producer = await send('POST', '/v1/runs', PRODUCER_TOKEN, model);
    expect(messages(producer)).toMatch(/OPENAI_API_KEY/);
    expect(messages(producer)).toMatch(/from model/);
  });
});
