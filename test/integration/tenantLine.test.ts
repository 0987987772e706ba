/**
 * One producer's burst cannot fill Redis for every tenant: a tenant's line holds at most FLOW_TENANT_MAX_WAITING runs
 * waiting to start, and a new run past it is refused 429 `tenant_line_full` with Retry-After, nothing written, on
 * POST /v1/runs and on the signed webhooks alike; the same intake again is answered as before; another tenant is not
 * held back; a child run is never refused (its parent is at work and waits for it); the refusal is counted and logged.
 * A tenant's own limit comes from FLOW_TENANT_WAITING_LIMITS, and one set at run time wins over it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, producerAuth, sampleTicket, type Harness } from '../../testkit/harness.js';
import { keySet, keysAddedSince } from '../../testkit/keyPrefix.js';
import { buildSpec, createAdmitted } from '../../src/producer/intake.js';
import { postSigned } from '../support/webhooks.js';
import { FleetClient, TooManyRequests } from '../../src/client/index.js';

const SECRET = 'acme-webhook-secret-for-lines';
const OPERATOR_TOKEN = 'operator-token-for-tenant-lines';
let h: Harness;
let url: string;

beforeAll(async () => {
  // No worker: the first run of a tenant holds its one slot, the next wait in its line.
  h = await createHarness('tenantline', {
    FLOW_CONTROL: 'true',
    FLOW_TENANT_CONCURRENCY: '1',
    FLOW_TENANT_MAX_WAITING: '2',
    FLOW_TENANT_WAITING_LIMITS: JSON.stringify({ initech: 1 }),
    WEBHOOK_SECRETS: JSON.stringify({ acme: SECRET, globex: SECRET }),
    WEBHOOK_TOLERANCE_S: '60',
    OPERATOR_TOKEN,
  });
  url = (await h.startApi()).url;
});
afterAll(async () => {
  await h.close();
});

async function postRun(tenant: string, id: string, eventKey = `ev-${id}`) {
  const res = await fetch(`${url}/v1/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...producerAuth, 'idempotency-key': eventKey },
    body: JSON.stringify({ tenant, ticket: sampleTicket(id) }),
  });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as never };
}

/** A tenant's own waiting limit set at run time (PUT /v1/flow/tenants/:tenant, what agentctl sends); null: back. */
const setMaxWaiting = (tenant: string, maxWaiting: number | null) =>
  fetch(`${url}/v1/flow/tenants/${tenant}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${OPERATOR_TOKEN}` },
    body: JSON.stringify({ maxWaiting }),
  });
/** The tenant's line as GET /v1/flow shows it. */
async function flowLine(tenant: string) {
  const res = await fetch(`${url}/v1/flow`, { headers: { authorization: `Bearer ${OPERATOR_TOKEN}` } });
  const view = (await res.json()) as { tenants: { tenant: string; waiting: number; maxWaiting: number }[] };
  return view.tenants.find((t) => t.tenant === tenant);
}
const lineLength = (tenant: string) => h.ctx.redis.zcard(h.ctx.keys.flowLine(tenant));
const keys = () => keySet(h.ctx.redis, h.cfg.KEY_PREFIX, h.cfg.BULL_PREFIX);
const refusals = async (tenant: string) => {
  const metric = await h.ctx.metrics.runsRefused.get();
  return metric.values.find((v) => v.labels.tenant === tenant && v.labels.reason === 'tenant_line_full')?.value ?? 0;
};

describe("a tenant's line at FLOW_TENANT_MAX_WAITING", () => {
  it('refuses a new run with 429 and Retry-After, nothing written; the same intake again is answered as before', async () => {
    const first = [await postRun('acme', 'L-1'), await postRun('acme', 'L-2'), await postRun('acme', 'L-3')];
    expect(first.map((r) => r.status)).toEqual([201, 201, 201]);
    expect(await lineLength('acme')).toBe(2);

    const before = await keys();
    const refused = await postRun('acme', 'L-4');
    expect(refused).toMatchObject({
      status: 429,
      retryAfter: '30',
      body: { error: 'tenant_line_full', tenant: 'acme', limit: 2 },
    });
    expect(await keysAddedSince(h.ctx.redis, before, h.cfg.KEY_PREFIX, h.cfg.BULL_PREFIX)).toEqual([]);
    expect(await lineLength('acme')).toBe(2);
    expect(await refusals('acme')).toBe(1);
    // The typed client: TooManyRequests, with the code and the wait the API asked for, not asked again.
    const token = producerAuth.authorization.slice('Bearer '.length);
    const client = new FleetClient({ url, token, retry: { maxDelayMs: 60_000 } });
    const err = await client
      .createRun({ tenant: 'acme', agent: 'support', input: sampleTicket('L-5') }, { idempotencyKey: 'ev-L-5' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TooManyRequests);
    const e = err as TooManyRequests;
    expect([e.code, e.status, e.retryAfterMs]).toEqual(['tenant_line_full', 429, 30_000]);
    expect(await refusals('acme')).toBe(2);

    // A run already in line, asked for again (its answer lost): the same run, whatever the line holds.
    const again = await postRun('acme', 'L-3');
    expect(again).toMatchObject({ status: 200, body: { runId: (first[2]!.body as { runId: string }).runId } });
    // Another tenant is not held back by acme's line.
    expect((await postRun('globex', 'G-1')).status).toBe(201);
  });

  it('refuses a signed webhook the same way, and its event can be delivered again later', async () => {
    expect(await lineLength('acme')).toBe(2);
    const event = { v: 1, eventId: 'wh-line-1', ticket: sampleTicket('L-WH') };
    const before = await keys();
    const refused = await postSigned(`${url}/webhooks/tickets?tenant=acme`, SECRET, event);
    expect(refused).toMatchObject({ status: 429, body: { error: 'tenant_line_full', tenant: 'acme', limit: 2 } });
    expect(await keysAddedSince(h.ctx.redis, before, h.cfg.KEY_PREFIX, h.cfg.BULL_PREFIX)).toEqual([]);

    // The line drains (one waiting run leaves it): the same event is taken now, one run.
    const [waiting] = await h.ctx.redis.zrange(h.ctx.keys.flowLine('acme'), 0, 0);
    await h.ctx.admission!.withdraw(waiting!);
    expect(await lineLength('acme')).toBe(1);
    const taken = await postSigned(`${url}/webhooks/tickets?tenant=acme`, SECRET, event);
    expect(taken).toMatchObject({ status: 201, body: { created: true, duplicate: false } });
    expect(await lineLength('acme')).toBe(2);
  });

  it("takes a tenant's own limit set at run time (agentctl flow tenant --max-waiting), and back to the setting", async () => {
    const setLimit = (maxWaiting: number | null) => setMaxWaiting('acme', maxWaiting);
    const flow = () => flowLine('acme');
    const waiting = await lineLength('acme');
    expect(await flow()).toMatchObject({ waiting, maxWaiting: 2 });
    expect((await setLimit(-1)).status).toBe(400);
    expect((await setLimit(waiting + 1)).status).toBe(200);
    expect(await flow()).toMatchObject({ waiting, maxWaiting: waiting + 1 });
    expect((await postRun('acme', 'L-OWN-1')).status).toBe(201);
    expect(await postRun('acme', 'L-OWN-2')).toMatchObject({
      status: 429,
      body: { error: 'tenant_line_full', tenant: 'acme', limit: waiting + 1 },
    });
    // Back to the setting (2): the line, longer than that now, takes no new run.
    expect((await setLimit(null)).status).toBe(200);
    expect(await flow()).toMatchObject({ maxWaiting: 2 });
    expect(await postRun('acme', 'L-OWN-3')).toMatchObject({ status: 429, body: { limit: 2 } });
  });

  it("takes a tenant's configured limit (FLOW_TENANT_WAITING_LIMITS) over the setting, and one set at run time over both", async () => {
    const setLimit = (maxWaiting: number | null) => setMaxWaiting('initech', maxWaiting);
    const flow = () => flowLine('initech');
    // The first run holds initech's one slot, the second waits: the line holds its configured 1.
    expect([(await postRun('initech', 'I-1')).status, (await postRun('initech', 'I-2')).status]).toEqual([201, 201]);
    expect(await lineLength('initech')).toBe(1);
    expect(await flow()).toMatchObject({ maxWaiting: 1 });
    expect(await postRun('initech', 'I-3')).toMatchObject({
      status: 429,
      body: { error: 'tenant_line_full', tenant: 'initech', limit: 1 },
    });
    expect((await setLimit(3)).status).toBe(200);
    expect(await flow()).toMatchObject({ maxWaiting: 3 });
    expect((await postRun('initech', 'I-3')).status).toBe(201);
    // Back to the default: the configured limit, not the fleet's 2.
    expect((await setLimit(null)).status).toBe(200);
    expect(await flow()).toMatchObject({ maxWaiting: 1 });
    expect(await postRun('initech', 'I-4')).toMatchObject({ status: 429, body: { limit: 1 } });
    // A tenant whose name is a property of every object has no configured limit: the fleet's.
    expect((await postRun('constructor', 'K-1')).status).toBe(201);
    expect(await flowLine('constructor')).toMatchObject({ maxWaiting: 2 });
  });

  it('never refuses a child run: its parent is at work and waits for it', async () => {
    const before = await lineLength('acme');
    const now = Date.now();
    const spec = buildSpec(h.ctx, { tenant: 'acme', ticket: sampleTicket('L-CHILD') }, now, 'child-event');
    const child = { ...spec, parent: { runId: 'r_000000000000000000000001', step: 1, callId: 'call-1' } };
    expect(await createAdmitted(h.ctx, child, now)).toMatchObject({ outcome: 'created' });
    expect(await lineLength('acme')).toBe(before + 1);
  });
});
