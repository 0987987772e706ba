/**
 * A query parameter given twice is the caller's error, never a filter dropped: `GET /v1/schedules?tenant=a&tenant=b`
 * listed every schedule, as if no tenant were asked. Each route that reads a parameter by hand (singleQuery) answers
 * 400 naming it; those read through a schema refuse the array the same way.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, producerAuth, sampleTicket, type Harness } from '../../testkit/harness.js';

const OPERATOR_TOKEN = 'operator-token-for-tests';
const operatorAuth = { authorization: `Bearer ${OPERATOR_TOKEN}` };
let h: Harness;
let url: string;
let runId: string;
beforeAll(async () => {
  h = await createHarness('repeatedQuery', {
    OPERATOR_TOKEN,
    WEBHOOK_SECRETS: JSON.stringify({ acme: 'acme-webhook-secret' }),
  });
  url = (await h.startApi()).url;
  const created = await fetch(`${url}/v1/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...producerAuth },
    body: JSON.stringify({ tenant: 'acme', ticket: sampleTicket('RQ-1') }),
  });
  expect(created.status).toBe(201);
  runId = ((await created.json()) as { runId: string }).runId;
});
afterAll(async () => {
  await h.close();
});

async function get(path: string, headers: Record<string, string>, method = 'GET') {
  const res = await fetch(`${url}${path}`, { method, headers });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : {}) as Record<string, unknown> };
}

describe('a query parameter given twice', () => {
  it('is a 400 naming it on every route that takes it, whichever way the route reads it', async () => {
    for (const [path, field, headers, method] of [
      ['/v1/schedules?tenant=acme&tenant=globex', 'tenant', operatorAuth, 'GET'],
      [`/v1/runs/${runId}/events?lastEventId=1-0&lastEventId=2-0`, 'lastEventId', producerAuth, 'GET'],
      ['/webhooks/tickets?tenant=acme&tenant=globex', 'tenant', {}, 'POST'],
      ['/v1/spend?period=2026-01&period=2026-02', 'period', operatorAuth, 'GET'],
      ['/v1/runs?tenant=acme&tenant=globex', 'tenant', operatorAuth, 'GET'],
    ] as const) {
      const res = await get(path, headers, method);
      expect(res.status, path).toBe(400);
      expect(res.body, path).toMatchObject({ error: 'invalid_request', fields: [{ path: field }] });
    }
  });

  it('given once, the filter still applies', async () => {
    const res = await get('/v1/schedules?tenant=acme', operatorAuth);
    expect(res).toMatchObject({ status: 200, body: { schedules: [] } });
  });
});
