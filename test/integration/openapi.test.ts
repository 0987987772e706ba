/**
 * GET /openapi.json: a valid OpenAPI 3.1 document (checked by a validator library) that matches the live app:
 * every JSON route the app mounts is in the document, and every operation in the document answers on the live
 * API with a status and content type the document lists for it; docs/api.md's count of operations and paths is the
 * built-in agents' document's.
 */
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AddressInfo } from 'node:net';
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, producerAuth, sampleTicket, type Harness } from '../../testkit/harness.js';
import { createFullApi } from '../../src/http/fullApi.js';
import { openApiDocument } from '../../src/http/openapi.js';
import { AgentCatalog } from '../../src/core/agent.js';
import { supportAgent } from '../../src/agents/support/index.js';
import { routesOf } from '../support/routes.js';
import { SIGNATURE_HEADER, TIMESTAMP_HEADER } from '../../src/producer/webhookSignature.js';
import { erasureRecordSchema, runsAtWorkSchema } from '../../src/http/erasures.js';
import { spendReportSchema } from '../../src/http/operators/spend.js';

const OPERATOR_TOKEN = 'operator-token-for-openapi';
/** The HTML pages and Bull Board: not JSON routes, not in the document. */
const HTML_ROUTES = /^\/(console|runs|admin)(\/|$)/;

type Responses = Record<string, { content?: Record<string, unknown> }>;
type Operation = { responses: Responses; security?: Record<string, string[]>[] };
type OpenApi = {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
  security: Record<string, string[]>[];
  components: { securitySchemes: Record<string, Record<string, string>> };
};

/** `/v1/runs/{id}` -> `/v1/runs/:id` (Express's form). */
const expressPath = (path: string) => path.replace(/\{(\w+)\}/g, ':$1');

/** A value for each path parameter: well-formed ids no run has. */
const SAMPLE: Record<string, string> = { id: `r_${'0'.repeat(24)}`, actionId: `a_${'0'.repeat(32)}`, tenant: 'acme' };

let h: Harness;
let url: string;
let server: Server;
let doc: OpenApi;

beforeAll(async () => {
  h = await createHarness('openapi', { OPERATOR_TOKEN });
  const app = createFullApi(h.ctx, () => true);
  server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const res = await fetch(`${url}/openapi.json`);
  expect(res.status).toBe(200);
  doc = (await res.json()) as OpenApi;
});

afterAll(async () => {
  server.close();
  await h.close();
});

describe('GET /openapi.json', () => {
  it("describes the run search params, the rows' subject and search fields, and the human queue's items", () => {
    const get = doc.paths['/v1/runs']!.get as unknown as { parameters: { name: string; style?: string }[] };
    const params = new Map(get.parameters.map((p) => [p.name, p]));
    for (const name of ['subject', 'customer', 'fields']) expect(params.has(name), name).toBe(true);
    expect(params.get('fields')).toMatchObject({ style: 'form', explode: true });
    const schemas = (doc.components as unknown as { schemas: Record<string, { properties: Record<string, unknown> }> })
      .schemas;
    expect(Object.keys(schemas.RunRow!.properties)).toEqual(expect.arrayContaining(['subject', 'search']));
    expect(Object.keys(schemas.HumanQueueItem!.properties)).toEqual(
      expect.arrayContaining(['actionId', 'runId', 'tenant', 'subject', 'state', 'history', 'since']),
    );
    const rec = doc.paths['/v1/reconciliations']!.get!.responses['200']!.content!['application/json'];
    expect(JSON.stringify(rec)).toContain('#/components/schemas/HumanQueueItem');
  });

  it("describes money: budget.maxCost on POST /v1/runs, the retry's cost, the rows' cost, GET /v1/spend's report", async () => {
    type Schema = { $ref?: string; properties?: Record<string, Schema>; anyOf?: Schema[]; description?: string };
    const schemas = (doc.components as unknown as { schemas: Record<string, Schema> }).schemas;
    const resolve = (s: Schema): Schema => (s.$ref ? resolve(schemas[s.$ref.split('/').at(-1)!]!) : s);
    const bodyOf = (path: string) =>
      resolve(
        (doc.paths[path]!.post as unknown as { requestBody: { content: Record<string, { schema: Schema }> } })
          .requestBody.content['application/json']!.schema,
      );
    const create = bodyOf('/v1/runs');
    const named = (create.anyOf ?? [create]).map(resolve).find((s) => s.properties?.agent)!;
    const maxCost = resolve(resolve(named.properties!.budget!).properties!.maxCost!);
    expect(maxCost).toMatchObject({ type: 'integer', exclusiveMinimum: 0 });
    expect(maxCost.description).toMatch(/µ\$.*agent's own.*LIMIT_MAX_COST/);
    expect(resolve(bodyOf('/v1/runs/{id}/retry').properties!.cost!).description).toMatch(/maxCost grows/);
    expect(Object.keys(schemas.RunRow!.properties!)).toContain('cost');
    const spend = doc.paths['/v1/spend']!.get!.responses['200']!.content!['application/json'] as { schema: Schema };
    const report = resolve(spend.schema);
    expect(Object.keys(report.properties!).sort()).toEqual(['currency', 'lines', 'period', 'totalMicros', 'unit']);
    const live = await fetch(`${url}/v1/spend`, { headers: { authorization: `Bearer ${OPERATOR_TOKEN}` } });
    expect(spendReportSchema.safeParse(await live.json()).success).toBe(true);
  });

  it("docs/api.md's count of operations and paths is the built-in agents' document's (npm run openapi)", () => {
    const text = readFileSync(join(dirname(fileURLToPath(import.meta.url)), '../../docs/api.md'), 'utf8');
    const said = /(\d+) operations on (\d+) paths/.exec(text.replace(/\s+/g, ' '));
    expect(said, 'docs/api.md names the count').not.toBeNull();
    const builtIn = openApiDocument(new AgentCatalog([supportAgent({ baseUrl: 'http://127.0.0.1' })])) as unknown as {
      paths: Record<string, Record<string, unknown>>;
    };
    const paths = Object.keys(builtIn.paths);
    const operations = paths.flatMap((p) =>
      Object.keys(builtIn.paths[p]!).filter((m) => ['get', 'put', 'post', 'delete', 'patch'].includes(m)),
    );
    expect({ operations: Number(said![1]), paths: Number(said![2]) }).toEqual({
      operations: operations.length,
      paths: paths.length,
    });
    expect(paths.filter((p) => p.startsWith('/webhooks/'))).toHaveLength(4);
  });

  it('is a valid OpenAPI 3.1 document', async () => {
    const result = await new Validator().validate(doc);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(doc.openapi).toBe('3.1.0');
  });

  it("declares each route's real credential: webhooks are HMAC-signed, never a bearer", () => {
    const webhooks = Object.entries(doc.paths).filter(([path]) => path.startsWith('/webhooks/'));
    expect(webhooks.length).toBeGreaterThan(0);
    for (const [path, ops] of webhooks) expect(ops.post!.security, path).toEqual([{ webhookSignature: [] }]);
    const scheme = doc.components.securitySchemes.webhookSignature!;
    expect(scheme).toMatchObject({ type: 'apiKey', in: 'header', name: SIGNATURE_HEADER });
    expect(scheme.description).toContain(TIMESTAMP_HEADER);
    expect(scheme.description).toContain('WEBHOOK_SECRETS');
    // Everything else keeps the document's bearer default (or says it needs nothing).
    expect(doc.security).toEqual([{ bearer: [] }]);
  });

  it('documents every JSON route the app mounts, and nothing else', () => {
    const routes = routesOf(() => createFullApi(h.ctx, () => true));
    const mounted = new Set(routes.filter((r) => !HTML_ROUTES.test(r.split(' ')[1]!)));
    const documented = new Set(
      Object.entries(doc.paths).flatMap(([path, ops]) =>
        Object.keys(ops).map((m) => `${m.toUpperCase()} ${expressPath(path)}`),
      ),
    );
    expect([...documented].sort()).toEqual([...mounted].sort());
  });

  it('every operation answers on the live API as the document says', async () => {
    const answered: string[] = [];
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        const target = path.replace(/\{(\w+)\}/g, (_m, name: string) => SAMPLE[name]!);
        const token =
          (method === 'post' && path === '/v1/runs') || method === 'put'
            ? producerAuth
            : { authorization: `Bearer ${OPERATOR_TOKEN}` };
        const init: RequestInit =
          method === 'get' || method === 'delete'
            ? { method: method.toUpperCase(), headers: token }
            : { method: method.toUpperCase(), headers: { ...token, 'content-type': 'application/json' }, body: '{}' };
        const controller = new AbortController();
        const res = await fetch(`${url}${target}`, { ...init, signal: controller.signal });
        const type = (res.headers.get('content-type') ?? '').split(';')[0]!;
        controller.abort(); // the event stream would stay open
        const listed = op.responses[String(res.status)];
        expect(listed, `${method.toUpperCase()} ${path} answered ${res.status}, not in the document`).toBeDefined();
        // An answer documented without content (204) has none.
        const types = listed!.content ? Object.keys(listed!.content) : [''];
        expect(types, `${method.toUpperCase()} ${path} ${res.status} content type`).toContain(type);
        answered.push(`${method.toUpperCase()} ${path} ${res.status}`);
      }
    }
    expect(answered.length).toBe(Object.values(doc.paths).reduce((n, ops) => n + Object.keys(ops).length, 0));
  });

  it('POST /v1/erasures: its 201 and 409 bodies are the documented schemas, each of its refusals listed', async () => {
    const op = doc.paths['/v1/erasures']!.post!;
    expect(Object.keys(op.responses).sort()).toEqual(['201', '400', '401', '403', '409', '503']);
    for (const status of Object.keys(op.responses)) expect(op.responses[status]!.content, status).toBeDefined();
    const schemas = (doc as unknown as { components: { schemas: Record<string, { properties: object }> } }).components
      .schemas;
    const erase = (subject: string) =>
      fetch(`${url}/v1/erasures`, {
        method: 'POST',
        headers: { authorization: `Bearer ${OPERATOR_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ tenant: 'acme', subject }),
      });
    const erased = await erase('OPENAPI-NONE');
    expect(erased.status).toBe(201);
    const record = erasureRecordSchema.parse(await erased.json());
    for (const key of Object.keys(record)) expect(schemas.ErasureRecord!.properties).toHaveProperty(key);
    // A run of the subject at work (queued, no worker): refused with the documented body.
    const create = await fetch(`${url}/v1/runs`, {
      method: 'POST',
      headers: { ...producerAuth, 'content-type': 'application/json' },
      body: JSON.stringify({ tenant: 'acme', ticket: sampleTicket('OPENAPI-AT-WORK') }),
    });
    expect(create.status).toBe(201);
    const { runId: atWork } = (await create.json()) as { runId: string };
    const refused = await erase('OPENAPI-AT-WORK');
    expect(refused.status).toBe(409);
    expect(runsAtWorkSchema.parse(await refused.json()).runIds).toEqual([atWork]);
    expect(Object.keys(schemas.RunsAtWork!.properties).sort()).toEqual(['error', 'message', 'runIds']);
  });
});
