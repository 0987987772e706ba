/**
 * GET /v1/runs?subject=&customer=&field.<name>=: runs found by what people know of them, from the search indexes
 * createRun writes with the run (src/runs/search.ts), on a single Redis and on a Redis Cluster (runs on 6 shards:
 * the search fans out and merges), tenant-scoped as every other route; the index keys hold no customer text and
 * expire with their runs.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSpec } from '../../../src/producer/intake.js';
import { producerAuth, sampleTicket, type Harness } from '../../../testkit/harness.js';
import { startLocalCluster, type LocalCluster } from '../../../testkit/cluster.js';
import { redisServerOnPath } from '../../../testkit/embeddedRedis.js';
import { SEARCH_ANY_TENANT, SEARCH_SUBJECT } from '../../../src/store/keys.js';
import { call, final, OPERATOR_TOKEN, operatorHarness, refund, turn } from './support.js';

interface Row {
  runId: string;
  status: string;
  tenant: string;
  subject: string;
  search?: Record<string, string>;
}
interface Page {
  runs: Row[];
  nextCursor?: string;
}

const GLOBEX_TENANT_TOKEN = 'globex-tenant-token';
const sha = (t: string) => createHash('sha256').update(t).digest('hex');

function searchSuite(name: string, env: () => Record<string, string>) {
  let h: Harness & { url: string };
  const tag = `${name}-${Date.now()}`;
  const ticket = (id: string) => `${id}-${tag}`;
  const runs: Record<string, string> = {};

  async function start(label: string, tenant: string, id: string, email: string, event?: string, park = false) {
    const spec = buildSpec(
      h.ctx,
      {
        tenant,
        ticket: { ...sampleTicket(ticket(id)), customer: { email, name: 'Ada' } },
        agent: { model: 'scripted', script: park ? [turn([refund(20_000)]), final] : [final] },
      },
      Date.now(),
      event,
    );
    expect(await h.ctx.store.create(spec, Date.now())).toBe(true);
    runs[label] = spec.runId;
    await h.waitForStatus(spec.runId, park ? ['waiting_approval'] : ['completed']);
  }

  async function search(query: string, token = OPERATOR_TOKEN): Promise<Row[]> {
    const rows: Row[] = [];
    let cursor: string | undefined;
    for (let pages = 0; pages < 20; pages++) {
      const res = await call<Page>(
        h.url,
        'GET',
        `/v1/runs?${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
        undefined,
        token,
      );
      expect(res.status).toBe(200);
      rows.push(...res.body.runs);
      cursor = res.body.nextCursor;
      if (!cursor) break;
    }
    return rows;
  }
  const ids = (rows: Row[]) => rows.map((r) => r.runId).sort();
  const of = (...labels: string[]) => labels.map((l) => runs[l]!).sort();
  const email = (who: string) => `${who}-${tag}@example.com`;

  beforeAll(async () => {
    h = await operatorHarness(`search-${name}`, {
      TENANT_TOKENS: JSON.stringify({ globex: GLOBEX_TENANT_TOKEN }),
      ...env(),
    });
    await start('a1', 'acme', 'T-A', email('ada'), 'e1');
    await start('a2', 'acme', 'T-A', email('ada'), 'e2'); // a follow-up on the same ticket
    await start('b', 'acme', 'T-B', email('ada'));
    await start('c', 'acme', 'T-C', email('bob'));
    await start('g', 'globex', 'T-A', email('ada'));
    await start('p', 'acme', 'T-P', email('cy'), undefined, true);
  }, 120_000);
  afterAll(async () => {
    await h?.close();
  });

  it("finds a subject's runs, newest first, in every tenant the reader may read", async () => {
    const rows = await search(`subject=${ticket('T-A')}`);
    expect(rows.map((r) => r.runId)).toEqual([runs.g, runs.a2, runs.a1]);
    expect(rows.every((r) => r.subject === ticket('T-A'))).toBe(true);
    expect(ids(await search(`subject=${ticket('T-A')}&tenant=acme`))).toEqual(of('a1', 'a2'));
  });

  it("finds a customer's runs across tickets and shards, and a custom field", async () => {
    const rows = await search(`customer=${encodeURIComponent(email('ada'))}&limit=1`);
    expect(ids(rows)).toEqual(of('a1', 'a2', 'b', 'g'));
    expect(rows.find((r) => r.runId === runs.b)?.search).toEqual({ customer: email('ada'), ticket: ticket('T-B') });
    expect(ids(await search(`field.ticket=${ticket('T-C')}`))).toEqual(of('c'));
    expect(ids(await search(`field.customer=${encodeURIComponent(email('bob'))}`))).toEqual(of('c'));
  });

  it('every term given must match; a status narrows', async () => {
    const q = `customer=${encodeURIComponent(email('ada'))}&subject=${ticket('T-A')}`;
    expect(ids(await search(`${q}&tenant=acme`))).toEqual(of('a1', 'a2'));
    expect(await search(`subject=${ticket('T-A')}&field.ticket=${ticket('T-B')}`)).toEqual([]);
    expect(ids(await search(`customer=${encodeURIComponent(email('cy'))}&status=waiting_approval`))).toEqual(of('p'));
    expect(await search(`customer=${encodeURIComponent(email('cy'))}&status=completed`)).toEqual([]);
  });

  it('is tenant-scoped: a tenant token finds only its own runs', async () => {
    const rows = await search(`subject=${ticket('T-A')}`, GLOBEX_TENANT_TOKEN);
    expect(ids(rows)).toEqual(of('g'));
    expect(await search(`subject=${ticket('T-A')}&tenant=acme`, GLOBEX_TENANT_TOKEN)).toEqual([]);
  });

  it('refuses a run whose search field is out of bounds, naming it, nothing written', async () => {
    const long = `${'x'.repeat(190)}-${tag}@example.com`;
    const res = await fetch(`${h.url}/v1/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...producerAuth },
      body: JSON.stringify({
        tenant: 'acme',
        ticket: { ...sampleTicket(ticket('T-LONG')), customer: { email: long, name: 'A' } },
      }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { fields: { path: string }[] }).fields.map((f) => f.path)).toEqual([
      'search.customer',
    ]);
    expect(await search(`subject=${ticket('T-LONG')}`)).toEqual([]);
  });

  it('refuses a malformed search with 400 naming the field', async () => {
    for (const [q, field] of [
      ['field.Bad-Name=x', 'fields'],
      ['subject=', 'subject'],
      [`subject=${'x'.repeat(201)}`, 'subject'],
      [`subject=x&since=1`, 'since'],
    ] as const) {
      const res = await call<{ fields: { path: string }[] }>(h.url, 'GET', `/v1/runs?${q}`, undefined, OPERATOR_TOKEN);
      expect(res.status, q).toBe(400);
      expect(res.body.fields[0]!.path).toContain(field);
    }
  });

  it("indexes expire with their runs: an ended run's index has the retention, a parked run's none", async () => {
    const key = (runId: string, tenant: string, field: string, value: string) =>
      h.ctx.keys.searchIndex(h.ctx.keys.shardOf(runId), tenant, field, value);
    const ended = key(runs.c!, 'acme', 'customer', email('bob'));
    expect(ended).not.toContain('example.com');
    const ttl = await h.ctx.redis.pttl(ended);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(h.cfg.RUN_RETENTION_MS);
    expect(await h.ctx.redis.exists(`${ended}:live`)).toBe(0);
    const parked = key(runs.p!, SEARCH_ANY_TENANT, SEARCH_SUBJECT, ticket('T-P'));
    expect(await h.ctx.redis.zscore(parked, runs.p!)).not.toBeNull();
    expect(await h.ctx.redis.pttl(parked)).toBe(-1);
    expect(await h.ctx.redis.get(`${parked}:live`)).toBe('1');
  });

  it('drops the entry of a run whose keys expired when met', async () => {
    const k = h.ctx.keys.run(runs.c!);
    const index = h.ctx.keys.searchIndex(h.ctx.keys.shardOf(runs.c!), 'acme', SEARCH_SUBJECT, ticket('T-C'));
    await h.ctx.redis.del(k.run, k.budget, k.journal, k.events);
    expect(await search(`subject=${ticket('T-C')}&tenant=acme`)).toEqual([]);
    expect(await h.ctx.redis.zscore(index, runs.c!)).toBeNull();
  });
}

describe('run search, single Redis', () => {
  searchSuite('single', () => ({
    OPERATORS: JSON.stringify([
      { name: 'tom', tokenSha256: sha('tom-token-0123456789'), role: 'viewer', tenants: ['globex'] },
    ]),
  }));
});

let cluster: LocalCluster | undefined;
describe.skipIf(!redisServerOnPath())('run search, Redis Cluster (6 shards on 3 masters)', () => {
  beforeAll(async () => {
    cluster = await startLocalCluster(3);
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });
  searchSuite('cluster', () => ({ REDIS_CLUSTER_NODES: cluster!.nodes.join(','), SHARDS: '6' }));
});
