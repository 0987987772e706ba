/**
 * GET /v1/runs and `agentctl runs`: runs listed and filtered by status, tenant
 * and agent from the indexes the status-changing scripts keep, paged with a
 * cursor over more runs than a page holds; the agent_runs_by_status gauge.
 */
import { createHash } from 'node:crypto';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSpec } from '../../../src/producer/intake.js';
import { createHarness, sampleTicket, type Harness } from '../../../testkit/harness.js';
import { call, final, OPERATOR_TOKEN, operatorHarness, refund, turn } from './support.js';
import { moduleArgs } from '../../../testkit/spawnModule.js';

interface Row {
  runId: string;
  status: string;
  tenant: string;
  agent: string;
  statusAt: number;
}
interface Page {
  runs: Row[];
  nextCursor?: string;
}

const TOM = 'tom-token-0123456789';
const GLOBEX_TENANT_TOKEN = 'globex-tenant-token';
const sha = (t: string) => createHash('sha256').update(t).digest('hex');

let h: Harness & { url: string };
const byTenant: Record<string, string[]> = { acme: [], globex: [] };
const parked: string[] = [];

async function start(tenant: string, script: unknown[], n: number): Promise<string> {
  const spec = buildSpec(
    h.ctx,
    {
      tenant,
      ticket: sampleTicket(`LIST-${tenant}-${n}-${Date.now()}`),
      agent: { model: 'scripted', script: script as never },
    },
    Date.now(),
  );
  await h.ctx.store.create(spec, Date.now());
  byTenant[tenant]!.push(spec.runId);
  return spec.runId;
}

/** Every page of a query, following nextCursor. */
async function walk(query: string, token = OPERATOR_TOKEN): Promise<{ rows: Row[]; pages: number }> {
  const rows: Row[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
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
    pages++;
  } while (cursor && pages < 50);
  return { rows, pages };
}

beforeAll(async () => {
  h = await operatorHarness('runs-list', {
    OPERATORS: JSON.stringify([{ name: 'tom', tokenSha256: sha(TOM), role: 'viewer', tenants: ['globex'] }]),
    TENANT_TOKENS: JSON.stringify({ globex: GLOBEX_TENANT_TOKEN }),
  });
  for (let i = 0; i < 5; i++) await start('acme', [final], i);
  for (let i = 0; i < 3; i++) parked.push(await start('globex', [turn([refund(20_000)]), final], i));
  parked.push(await start('acme', [turn([refund(20_000)]), final], 9));
  for (const id of byTenant.acme!.slice(0, 5))
    expect(await h.waitForStatus(id, ['completed', 'failed'])).toBe('completed');
  for (const id of parked) expect(await h.waitForStatus(id, ['waiting_approval'])).toBe('waiting_approval');
});
afterAll(async () => {
  await h.close();
});

describe('GET /v1/runs', () => {
  it('pages over more runs than a page holds: each run once, newest status change first', async () => {
    const { rows, pages } = await walk('limit=2');
    expect(pages).toBeGreaterThanOrEqual(5);
    expect(rows.map((r) => r.runId).sort()).toEqual([...byTenant.acme!, ...byTenant.globex!].sort());
    const order = rows.map((r) => [r.statusAt, r.runId] as const);
    const sorted = [...order].sort((a, b) => b[0] - a[0] || (a[1] < b[1] ? 1 : -1));
    expect(order).toEqual(sorted);
    expect(new Set(rows.map((r) => r.agent))).toEqual(new Set(['support']));
  });

  it('filters by status, tenant and agent, and a status change moves the run between lists', async () => {
    const completed = await walk('status=completed&limit=2');
    expect(completed.rows.map((r) => r.runId).sort()).toEqual(byTenant.acme!.slice(0, 5).sort());
    const globex = await walk('tenant=globex&status=waiting_approval&limit=2');
    expect(globex.rows.map((r) => r.runId).sort()).toEqual([...parked.slice(0, 3)].sort());
    expect((await walk('tenant=acme&agent=support&limit=3')).rows).toHaveLength(6);
    expect((await walk('agent=support&limit=4')).rows).toHaveLength(9);
    expect((await walk('agent=billing')).rows).toEqual([]);

    // Cancel one parked run: it leaves waiting_approval and is listed as cancelled.
    const moved = parked[3]!;
    expect((await call(h.url, 'POST', `/v1/runs/${moved}/cancel`, {})).status).toBe(200);
    expect((await walk('status=waiting_approval')).rows.map((r) => r.runId)).not.toContain(moved);
    expect((await walk('status=cancelled')).rows.map((r) => r.runId)).toEqual([moved]);
  });

  it("a tenant-scoped operator and a tenant token list only their tenants' runs", async () => {
    const scoped = await walk('limit=2', TOM);
    expect(scoped.rows.map((r) => r.runId).sort()).toEqual([...byTenant.globex!].sort());
    expect((await walk('tenant=acme', TOM)).rows).toEqual([]);
    const tenant = await walk('limit=5', GLOBEX_TENANT_TOKEN);
    expect(tenant.rows.every((r) => r.tenant === 'globex')).toBe(true);
    expect(tenant.rows).toHaveLength(3);
  });

  it('refuses a malformed query or cursor (400 naming the field) and an unknown token (401)', async () => {
    for (const [q, field] of [
      ['status=bogus', 'status'],
      ['limit=0', 'limit'],
      ['tenant=a:b', 'tenant'],
      ['cursor=xyz', 'cursor'],
      ['extra=1', '(body)'],
    ] as const) {
      const res = await call<{ fields: { path: string }[] }>(h.url, 'GET', `/v1/runs?${q}`);
      expect(res.status, q).toBe(400);
      expect(JSON.stringify(res.body.fields), q).toContain(field === '(body)' ? '' : field);
    }
    expect((await call(h.url, 'GET', '/v1/runs', undefined, 'nope')).status).toBe(401);
  });

  it('agent_runs_by_status counts runs per status from the same indexes', async () => {
    const metric = await h.ctx.metrics.registry.getSingleMetric('agent_runs_by_status')!.get();
    const of = (s: string) => metric.values.find((v) => v.labels.status === s)?.value;
    expect(of('completed')).toBe(5);
    expect(of('waiting_approval')).toBe(3);
    expect(of('cancelled')).toBe(1);
    expect(of('running')).toBe(0);
  });

  it('agentctl runs filters and pages', async () => {
    const run = promisify(execFile);
    const { stdout } = await run(process.execPath, [
      ...moduleArgs('src/server/agentctl'),
      'runs',
      '--status',
      'waiting_approval',
      '--tenant',
      'globex',
      '--limit',
      '2',
      '--url',
      h.url,
      '--token',
      OPERATOR_TOKEN,
    ]);
    const first = JSON.parse(stdout) as Page;
    expect(first.runs).toHaveLength(2);
    expect(first.nextCursor).toBeDefined();
    const next = JSON.parse(
      (
        await run(process.execPath, [
          ...moduleArgs('src/server/agentctl'),
          'runs',
          '--status',
          'waiting_approval',
          '--tenant',
          'globex',
          '--cursor',
          first.nextCursor!,
          '--url',
          h.url,
          '--token',
          OPERATOR_TOKEN,
        ])
      ).stdout,
    ) as Page;
    expect([...first.runs, ...next.runs].map((r) => r.runId).sort()).toEqual([...parked.slice(0, 3)].sort());
    expect(next.nextCursor).toBeUndefined();
  });
});

describe('listing runs whose status changed in the same millisecond', () => {
  it('pages through equal times by run id, each run once', async () => {
    const quiet = await createHarness('runs-list-ties', { OPERATOR_TOKEN });
    try {
      const at = Date.now();
      const ids: string[] = [];
      for (let i = 0; i < 7; i++) {
        const spec = buildSpec(quiet.ctx, { tenant: 'acme', ticket: sampleTicket(`TIE-${i}-${at}`) }, at);
        await quiet.ctx.store.create(spec, at);
        ids.push(spec.runId);
      }
      const { listRuns } = await import('../../../src/runs/list.js');
      const seen: string[] = [];
      let cursor;
      for (let pages = 0; pages < 10; pages++) {
        const page = await listRuns(quiet.ctx.redis, quiet.ctx.keys, {
          statuses: ['queued'],
          limit: 2,
          ...(cursor ? { cursor } : {}),
        });
        seen.push(...page.runs.map((r) => r.runId));
        if (!page.nextCursor) break;
        const { decodeCursor } = await import('../../../src/runs/list.js');
        cursor = decodeCursor(page.nextCursor);
      }
      expect(seen).toEqual([...ids].sort().reverse());
    } finally {
      await quiet.close();
    }
  });
});
