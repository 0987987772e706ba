/**
 * The API fuzzed in process against real Redis: generated and mutated bodies, headers, cookies, path parameters
 * and query strings (test/support/fuzz/requests.ts) against every route: the OpenAPI document's, plus every route
 * the app mounts (console, run pages, webhooks) and Bull Board. The property, request by request: no 5xx, no hang,
 * and nothing written to Redis for a 4xx (every write to the test's own redis-server is seen as a keyspace event,
 * test/support/fuzz/writes.ts, which sets notify-keyspace-events: a server setting, so not on the suite's shared one). A fixed seed (FUZZ_SEED to replay another); FUZZ_RUNS=n requests per route.
 * Credentials: the producer, an operator, a viewer, and two tenants' tokens, each tenant holding a schedule (`daily`).
 */
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSpec } from '../../src/producer/intake.js';
import { createFullApi } from '../../src/http/fullApi.js';
import { openApiDocument } from '../../src/http/openapi.js';
import { startEmbeddedRedis, type EmbeddedRedis } from '../../testkit/embeddedRedis.js';
import { createHarness, PRODUCER_TOKEN, sampleTicket, type Harness } from '../../testkit/harness.js';
import { routesOf } from '../support/routes.js';
import { requestTo, type FuzzRoute, type FuzzWorld } from '../support/fuzz/requests.js';
import { send, type RawRequest } from '../support/fuzz/send.js';
import { watchWrites, type WriteWatch } from '../support/fuzz/writes.js';
import { until } from '../../testkit/until.js';

const SEED = Number(process.env.FUZZ_SEED ?? 20261203);
const RUNS = Number(process.env.FUZZ_RUNS ?? 80);
const TIMEOUT_MS = 5000;
const OPERATOR_TOKEN = 'operator-token-for-the-fuzzer';
const ACME = 'acme-tenant-token-for-the-fuzzer';
const GLOBEX = 'globex-tenant-token-for-the-fuzzer';
const VIEWER = 'viewer-token-for-the-fuzzer';
const SECRET = 'acme-webhook-secret-for-the-fuzzer';
const BOARD = { user: 'board', password: 'board-password-for-the-fuzzer' };
/**
 * The one write a 4xx may make: a console session that no longer matches the operator directory (its operator's
 * sessions were ended, here by the fuzzer's own POST /v1/operators/:name/sessions/end) is deleted by the request
 * that presents it (docs/security.md, How access is revoked).
 */
const ALLOWED_ON_4XX = /^del \S+:console-session:\S+$/;

const ticket = sampleTicket('FZ-1');
/** Bodies each route accepts, mutated by the fuzzer (keyed `METHOD /path`, Express form). */
const SEEDS: Record<string, unknown> = {
  'POST /v1/runs': { tenant: 'acme', ticket },
  'POST /webhooks/tickets/:tenant': { v: 1, eventId: 'ev-1', ticket },
  'POST /webhooks/tickets': { v: 1, eventId: 'ev-1', ticket },
  'POST /webhooks/zendesk/:tenant': {
    eventId: 'zd-1',
    ticket: { id: 1, subject: 's', description: 'd', requester: { email: 'a@example.com', name: 'A' } },
    comment: { id: 1, body: 'b' },
  },
  'PUT /v1/schedules/:id': { tenant: 'acme', agent: 'support', cron: '*/5 * * * *', input: ticket },
  'PUT /v1/flow/tenants/:tenant': { weight: 2, limit: 5 },
  'PUT /v1/flow/agents/:agent': { limit: 5 },
  'POST /v1/approvals/:actionId': { decision: 'approve', fingerprint: 'f', approver: 'alice' },
  'POST /v1/reconciliations/:actionId': { finding: 'confirmed', receipt: 'r-1', evidence: 'seen at the vendor' },
  'POST /v1/runs/:id/retry': { steps: 1 },
  'POST /v1/runs/:id/cancel': { operator: 'alice' },
  'POST /v1/operators/version-mismatches/:id/continue': {},
  'POST /v1/erasures': { tenant: 'acme', subject: 'FZ-1' },
};
SEEDS['POST /webhooks/zendesk'] = SEEDS['POST /webhooks/zendesk/:tenant'];

let server: EmbeddedRedis;
let h: Harness;
let base: URL;
let watch: WriteWatch;
let world: FuzzWorld;

/** Every route: the document's (with the query names it lists), every route the app mounts, Bull Board. */
function allRoutes(): FuzzRoute[] {
  type Op = { parameters?: { in: string; name: string }[] };
  const doc = openApiDocument(h.ctx.agents) as unknown as { paths: Record<string, Record<string, Op>> };
  const routes = new Map<string, FuzzRoute>();
  const add = (method: string, path: string, query: string[] = []) => {
    const key = `${method} ${path}`;
    routes.set(key, { method, path, query, seed: SEEDS[key], form: path.startsWith('/console') && method === 'POST' });
  };
  for (const [path, ops] of Object.entries(doc.paths))
    for (const [method, op] of Object.entries(ops)) {
      const query = (op.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name);
      add(method.toUpperCase(), path.replace(/\{(\w+)\}/g, ':$1'), query);
    }
  for (const r of routesOf(() => createFullApi(h.ctx, () => true))) {
    const [method, path] = r.split(' ') as [string, string];
    if (!routes.has(r)) add(method, path);
  }
  add('GET', '/admin/queues');
  add('GET', '/admin/queues/api/queues');
  return [...routes.values()];
}

/** A console session as the login form opens it. */
async function sessionCookie(url: string): Promise<string> {
  const form = await fetch(`${url}/console/login`);
  const csrfCookie = form.headers
    .getSetCookie()
    .find((c) => c.startsWith('console_login_csrf='))!
    .split(';')[0]!;
  const csrf = csrfCookie.split('=')[1]!;
  const login = await fetch(`${url}/console/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: csrfCookie },
    body: `token=${OPERATOR_TOKEN}&csrf=${csrf}`,
  });
  return login.headers
    .getSetCookie()
    .find((c) => c.startsWith('console_session='))!
    .split(';')[0]!;
}

beforeAll(async () => {
  // A server of its own: every write in it is this test's.
  server = await startEmbeddedRedis();
  h = await createHarness('fuzz', {
    REDIS_URL: server.url,
    OPERATOR_TOKEN,
    TENANT_TOKENS: JSON.stringify({ acme: ACME, globex: GLOBEX }),
    OPERATORS: JSON.stringify([
      { name: 'vic', tokenSha256: createHash('sha256').update(VIEWER).digest('hex'), role: 'viewer', tenants: '*' },
    ]),
    // Two each: a PUT of a new schedule meets the cap (409, nothing written) as often as it passes.
    SCHEDULES_MAX_PER_TENANT: '2',
    WEBHOOK_SECRETS: JSON.stringify({ acme: SECRET }),
    CONSOLE_SESSION_SECRET: 'fuzz-console-session-secret-0123456789',
    BULL_BOARD_USER: BOARD.user,
    BULL_BOARD_PASSWORD: BOARD.password,
  });
  const { url } = await h.startApi();
  base = new URL(url);
  const spec = buildSpec(h.ctx, { tenant: 'acme', ticket: sampleTicket(`FZ-RUN-${Date.now()}`) }, Date.now());
  await h.ctx.store.create(spec, Date.now());
  // A schedule of each tenant, made with its own token: the schedule routes meet one they may and one they may not
  // touch (the ids below name both).
  for (const [tenant, token] of [
    ['acme', ACME],
    ['globex', GLOBEX],
  ] as const) {
    const put = await fetch(`${url}/v1/schedules/daily`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ tenant, agent: 'support', cron: '0 3 * * *', input: ticket }),
    });
    expect(put.status).toBe(200);
  }
  world = {
    tokens: [PRODUCER_TOKEN, OPERATOR_TOKEN, ACME, GLOBEX, VIEWER],
    basic: [`Basic ${Buffer.from(`${BOARD.user}:${BOARD.password}`).toString('base64')}`],
    cookies: [await sessionCookie(url)],
    ids: [spec.runId, `r_${'0'.repeat(24)}`, `a_${'0'.repeat(32)}`, 'acme', 'globex', 'support', 'daily', 'operator'],
    webhookSecret: SECRET,
  };
  watch = await watchWrites(server.url, 0);
});

afterAll(async () => {
  await watch?.close();
  await h?.close().catch(() => {});
  await server?.stop();
});

async function viewersGone(): Promise<void> {
  const live = async () => (await h.ctx.metrics.sseViewers.get()).values.reduce((n, v) => n + v.value, 0);
  await until('no live viewers', 2000, async () => (await live()) === 0, 5);
}

/** One request, checked: an answer, no 5xx, nothing written for a 4xx. */
async function check(route: FuzzRoute, req: RawRequest, tally: Map<number, number>): Promise<void> {
  const w = watch.window();
  const answer = await send(base, req, TIMEOUT_MS);
  const writes = (await w.end()).filter((x) => !ALLOWED_ON_4XX.test(x));
  const what = `${req.method} ${req.target.slice(0, 200)}`;
  if ('error' in answer) throw new Error(`${what}: no answer (${answer.error})`);
  if ('hung' in answer) throw new Error(`${what}: no answer within ${TIMEOUT_MS} ms`);
  tally.set(answer.status, (tally.get(answer.status) ?? 0) + 1);
  if (answer.status >= 500) throw new Error(`${what}: ${answer.status}`);
  if (answer.status >= 400 && writes.length > 0)
    throw new Error(`${what}: ${answer.status} after writing ${writes.slice(0, 5).join(', ')}`);
  // Work a success started must not land in the next request's window: an event stream's slot is given back, and
  // its shard reader stopped (deleting its wake key), only once the server sees the stream closed.
  if (answer.type === 'text/event-stream') await viewersGone();
  if (answer.status < 400) await watch.settle(30, 1000);
  void route;
}

describe('fuzz: every route, generated and mutated requests', () => {
  it('no 5xx, no hang, nothing written for a 4xx', async () => {
    const routes = allRoutes();
    const statuses = new Map<string, Map<number, number>>();
    const started = Date.now();
    for (const [i, route] of routes.entries()) {
      const tally = new Map<number, number>();
      statuses.set(`${route.method} ${route.path}`, tally);
      await fc.assert(
        fc.asyncProperty(requestTo(route, world), (req) => check(route, req, tally)),
        { seed: SEED + i, numRuns: RUNS, endOnFailure: true },
      );
    }
    const total = [...statuses.values()].reduce((n, t) => n + [...t.values()].reduce((a, b) => a + b, 0), 0);
    console.log(
      `fuzz: seed ${SEED} (route i: seed + i), ${RUNS} runs per route (FUZZ_RUNS), ${total} requests, ${routes.length} routes, ` +
        `${Date.now() - started} ms\n` +
        [...statuses].map(([r, t]) => `  ${r}: ${[...t].map(([s, n]) => `${s}x${n}`).join(' ')}`).join('\n'),
    );
    expect(statuses.size).toBe(routes.length);
  }, 600_000);
});
