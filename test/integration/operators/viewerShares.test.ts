/**
 * One tenant cannot take every live view: over real HTTP, a tenant token that opens its share of event streams is
 * refused naming SSE_MAX_VIEWERS_PER_PRINCIPAL while another tenant and an operator still get streams; when the
 * tenants fill everything outside the operators' reserve, tenants and the producer are refused naming
 * SSE_OPERATOR_RESERVE and operators still get the reserve; past the whole, SSE_MAX_VIEWERS. Each refusal is counted.
 *
 * A stream the test holds is held by its Response, not only by its AbortController: undici cancels the body of a
 * Response that is garbage collected, which closes the stream and gives its slot back. In the whole suite (one worker
 * process runs many files, its heap large and collected often) a test that kept only the controller lost streams
 * between opening them and the refusal it expected; each check below runs after a collection, as the suite's would.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildSpec } from '../../../src/producer/intake.js';
import { createHarness, PRODUCER_TOKEN, sampleTicket, type Harness } from '../../../testkit/harness.js';
import { OPERATOR_TOKEN } from './support.js';
import { until } from '../../../testkit/until.js';

const ACME = 'acme-tenant-token-for-viewer-tests';
const GLOBEX = 'globex-tenant-token-for-viewer-tests';
const INITECH = 'initech-tenant-token-for-viewer-tests';
const MAX = 10;
const PER_PRINCIPAL = 4;
const RESERVE = 3;

let h: Harness;
let url: string;
const runs: Record<string, string> = {};
/** The streams open now: each one's Response (which keeps it open, see above) and its controller (which ends it). */
const open: { res: Response; ac: AbortController }[] = [];

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

beforeAll(async () => {
  h = await createHarness('viewerShares', {
    OPERATOR_TOKEN,
    TENANT_TOKENS: JSON.stringify({ acme: ACME, globex: GLOBEX, initech: INITECH }),
    SSE_MAX_VIEWERS: String(MAX),
    SSE_MAX_VIEWERS_PER_PRINCIPAL: String(PER_PRINCIPAL),
    SSE_OPERATOR_RESERVE: String(RESERVE),
  });
  url = (await h.startApi()).url;
  // No worker: each run stays queued, so its stream stays open with keep-alives.
  for (const tenant of ['acme', 'globex', 'initech']) {
    const spec = buildSpec(h.ctx, { tenant, ticket: sampleTicket(`VIEW-${tenant}-${Date.now()}`) }, Date.now());
    await h.ctx.store.create(spec, Date.now());
    runs[tenant] = spec.runId;
  }
});
afterEach(() => {
  for (const { ac } of open.splice(0)) ac.abort();
});
afterAll(async () => {
  await h.close();
});

/** Opens a stream of `tenant`'s run with `token`; a 200 stays open (until the test ends), anything else is read. */
async function view(token: string, tenant: string): Promise<{ status: number; body?: Record<string, unknown> }> {
  const ac = new AbortController();
  const res = await fetch(`${url}/v1/runs/${runs[tenant]}/events`, {
    headers: { authorization: `Bearer ${token}` },
    signal: ac.signal,
  });
  if (res.status === 200) {
    open.push({ res, ac });
    return { status: 200 };
  }
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function viewMany(n: number, token: string, tenant: string): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < n; i++) statuses.push((await view(token, tenant)).status);
  return statuses;
}

async function refusedCount(limit: string): Promise<number> {
  const m = await h.ctx.metrics.sseViewersRefused.get();
  return m.values.filter((v) => v.labels.limit === limit).reduce((a, v) => a + v.value, 0);
}

/** Waits until the process counts `n` live viewers (a closed stream is released when its response closes). */
async function viewersBecome(n: number): Promise<void> {
  const now = async () => (await h.ctx.metrics.sseViewers.get()).values.reduce((a, v) => a + v.value, 0);
  await until(`${n} live viewers`, 3000, async () => (await now()) === n);
}

describe('event stream viewers: shares per principal and an operator reserve', () => {
  it('a tenant that holds its share is refused naming its own limit; another tenant and an operator are served', async () => {
    const before = await refusedCount('SSE_MAX_VIEWERS_PER_PRINCIPAL');
    expect(await viewMany(PER_PRINCIPAL, ACME, 'acme')).toEqual(Array(PER_PRINCIPAL).fill(200));
    gc();
    const refused = await view(ACME, 'acme');
    expect(refused.status).toBe(503);
    expect(refused.body).toMatchObject({
      error: 'too_many_viewers',
      limit: 'SSE_MAX_VIEWERS_PER_PRINCIPAL',
      max: PER_PRINCIPAL,
    });
    expect(refused.body?.message).toContain('SSE_MAX_VIEWERS_PER_PRINCIPAL');
    expect(await refusedCount('SSE_MAX_VIEWERS_PER_PRINCIPAL')).toBe(before + 1);

    expect((await view(GLOBEX, 'globex')).status).toBe(200);
    expect((await view(OPERATOR_TOKEN, 'acme')).status).toBe(200);

    // A stream that ends gives its slot back.
    open.shift()!.ac.abort();
    await viewersBecome(PER_PRINCIPAL + 1);
    expect((await view(ACME, 'acme')).status).toBe(200);
  });

  it('when tenants fill all but the reserve, tenants and the producer are refused naming SSE_OPERATOR_RESERVE; operators get the reserve, then SSE_MAX_VIEWERS', async () => {
    await viewersBecome(0);
    const before = await refusedCount('SSE_OPERATOR_RESERVE');
    const shared = MAX - RESERVE;
    expect(await viewMany(PER_PRINCIPAL, ACME, 'acme')).toEqual(Array(PER_PRINCIPAL).fill(200));
    expect(await viewMany(shared - PER_PRINCIPAL, GLOBEX, 'globex')).toEqual(Array(shared - PER_PRINCIPAL).fill(200));
    gc();

    for (const [token, tenant] of [
      [GLOBEX, 'globex'],
      [INITECH, 'initech'],
      [PRODUCER_TOKEN, 'initech'],
    ] as const) {
      const refused = await view(token, tenant);
      expect(refused.status).toBe(503);
      expect(refused.body).toMatchObject({ error: 'too_many_viewers', limit: 'SSE_OPERATOR_RESERVE', max: shared });
    }
    expect(await refusedCount('SSE_OPERATOR_RESERVE')).toBe(before + 3);

    expect(await viewMany(RESERVE, OPERATOR_TOKEN, 'initech')).toEqual(Array(RESERVE).fill(200));
    gc();
    const full = await view(OPERATOR_TOKEN, 'acme');
    expect(full.status).toBe(503);
    expect(full.body).toMatchObject({ error: 'too_many_viewers', limit: 'SSE_MAX_VIEWERS', max: MAX });
    expect(await refusedCount('SSE_MAX_VIEWERS')).toBe(1);
    const gauge = (await h.ctx.metrics.sseViewers.get()).values;
    expect(Object.fromEntries(gauge.map((v) => [v.labels.principal, v.value]))).toMatchObject({
      tenant: shared,
      operator: RESERVE,
    });
  });
});
