/**
 * Requests a careless client or an attacker could send to one route: path parameters, query strings, headers,
 * cookies and bodies, generated (any code point, lone surrogates, malformed %-escapes, garbage bytes, deep
 * nesting) or mutated from a body the route accepts (a field replaced, removed or added).
 */
import fc from 'fast-check';
import { sign } from '../../../src/producer/webhookSignature.js';
import type { RawRequest } from './send.js';

export interface FuzzRoute {
  method: string;
  /** Express form: /v1/runs/:id */
  path: string;
  /** Query parameter names the route reads (from the OpenAPI document). */
  query: string[];
  /** A body the route accepts, to mutate; undefined: generated bodies only. */
  seed?: unknown;
  /** The console's forms take application/x-www-form-urlencoded. */
  form: boolean;
}

/** What valid requests carry: credentials, a session, ids that exist. */
export interface FuzzWorld {
  tokens: string[];
  basic: string[];
  cookies: string[];
  ids: string[];
  webhookSecret: string;
}

const NASTY = ['%', '%E0%A4%A', '%ZZ', '%00', '%2F', '..', '%2e%2e', '%ED%A0%80', '%C0%AF', '%FF', 'a%', '%%', '.'];

/** %-escapes of a string's UTF-8 bytes (a lone surrogate becomes U+FFFD's). */
const pct = (s: string) => [...Buffer.from(s)].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');
/** Anything node:http puts in a header value: tab, printable ASCII, Latin-1 above 0x7f. */
const headerSafe = (s: string) => s.replace(/[^\t\x20-\x7e\x80-\xff]/g, '');
/** A path segment or query part sent as typed: no space, control character or one that ends the part. */
const rawPart = (s: string) => s.replace(/[^\x21-\xff]|[/?#&=]/g, (c) => pct(c));

const anyString = fc.string({ unit: 'binary', maxLength: 40 });

function segment(world: FuzzWorld): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 8, arbitrary: fc.constantFrom(...world.ids) },
    { weight: 2, arbitrary: fc.constantFrom(...NASTY) },
    { weight: 2, arbitrary: anyString.map(pct) },
    { weight: 2, arbitrary: anyString.map(rawPart) },
    { weight: 1, arbitrary: fc.constant('a'.repeat(3000)) },
  );
}

function queryString(route: FuzzRoute, world: FuzzWorld): fc.Arbitrary<string> {
  const key = fc.oneof(
    fc.constantFrom(...route.query, 'limit', 'cursor', '__proto__', 'constructor', 'a[b]', 'status[]'),
    anyString.map(rawPart),
  );
  const value = fc.oneof(segment(world), fc.integer().map(String), fc.constant(''));
  return fc
    .array(fc.tuple(key, value), { maxLength: 5 })
    .map((pairs) => (pairs.length === 0 ? '' : `?${pairs.map(([k, v]) => `${k}=${v}`).join('&')}`));
}

/** Every path a JSON value has, to pick one to mutate. */
function pathsOf(v: unknown, at: (string | number)[] = []): (string | number)[][] {
  if (v === null || typeof v !== 'object') return [at];
  const keys = Array.isArray(v) ? v.map((_x, i) => i) : Object.keys(v);
  return [at, ...keys.flatMap((k) => pathsOf((v as Record<string | number, unknown>)[k], [...at, k]))];
}

type Mutation = 'replace' | 'delete' | 'add';

function mutate(seed: unknown, op: Mutation, pick: number, value: unknown, key: string): unknown {
  const copy = structuredClone(seed);
  const paths = pathsOf(copy).filter((p) => p.length > 0);
  if (paths.length === 0) return value;
  const path = paths[pick % paths.length]!;
  let parent = copy as Record<string | number, unknown>;
  for (const k of path.slice(0, -1)) parent = parent[k] as Record<string | number, unknown>;
  const last = path[path.length - 1]!;
  if (op === 'replace') parent[last] = value;
  else if (op === 'delete') delete parent[last];
  else if (typeof parent === 'object' && !Array.isArray(parent))
    Object.defineProperty(parent, key, { value, enumerable: true });
  return copy;
}

const jsonValue = fc.jsonValue({ maxDepth: 3, stringUnit: 'binary' });

function jsonBody(route: FuzzRoute): fc.Arbitrary<unknown> {
  const generated = fc.oneof(jsonValue, fc.dictionary(anyString, jsonValue, { maxKeys: 4 }));
  if (route.seed === undefined) return generated;
  const mutated = fc
    .tuple(
      fc.constantFrom<Mutation>('replace', 'delete', 'add'),
      fc.nat(),
      jsonValue,
      fc.oneof(fc.constantFrom('__proto__', 'constructor', 'toString', 'extra'), anyString),
    )
    .map(([op, pick, value, key]) => mutate(route.seed, op, pick, value, key));
  return fc.oneof(
    { weight: 1, arbitrary: fc.constant(route.seed) },
    { weight: 4, arbitrary: mutated },
    { weight: 2, arbitrary: generated },
  );
}

const RAW_BODIES = [
  '',
  '{',
  '{"a":',
  'null',
  '"x"',
  '\ufeff{}',
  '{"__proto__":{"polluted":1}}',
  '['.repeat(5000),
  '{"a":'.repeat(2000),
  'token=&csrf=',
  '%E0%A4%A=1',
];

function body(route: FuzzRoute): fc.Arbitrary<Buffer | undefined> {
  const json = jsonBody(route).map((v) => Buffer.from(JSON.stringify(v) ?? 'null'));
  const raw = fc.oneof(
    fc.constantFrom(...RAW_BODIES).map((s) => Buffer.from(s)),
    fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)),
  );
  const form = fc
    .array(fc.tuple(fc.constantFrom('csrf', 'token', 'decision', 'fingerprint', 'steps', 'outcome'), segment(EMPTY)))
    .map((pairs) => Buffer.from(pairs.map(([k, v]) => `${k}=${v}`).join('&')));
  return fc.oneof(
    { weight: route.form ? 1 : 6, arbitrary: json },
    { weight: 2, arbitrary: raw },
    { weight: route.form ? 6 : 1, arbitrary: form },
    { weight: route.method === 'GET' ? 6 : 1, arbitrary: fc.constant(undefined) },
  );
}
const EMPTY: FuzzWorld = { tokens: [], basic: [], cookies: [], ids: ['x'], webhookSecret: '' };

const CONTENT_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'application/json; charset=utf-16',
  'application/json; charset=bogus',
  'application/x-www-form-urlencoded',
  'text/plain',
  'multipart/form-data; boundary=x',
  '',
  ';;;',
];
const EXTRA_HEADERS = [
  'idempotency-key',
  'last-event-id',
  'x-zendesk-webhook-invocation-id',
  'content-encoding',
  'accept',
  'accept-encoding',
  'x-forwarded-for',
  'x-forwarded-proto',
  'origin',
  'if-none-match',
  'range',
];

function headers(route: FuzzRoute, world: FuzzWorld): fc.Arbitrary<Record<string, string | undefined>> {
  const latin = anyString.map(headerSafe);
  return fc.record({
    authorization: fc.option(
      fc.oneof(
        { weight: 8, arbitrary: fc.constantFrom(...world.tokens.map((t) => `Bearer ${t}`), ...world.basic) },
        { weight: 1, arbitrary: fc.constantFrom('Bearer ', 'Basic !!!', 'bearer x', `Bearer ${'a'.repeat(10_000)}`) },
        { weight: 1, arbitrary: latin.map((s) => `Bearer ${s}`) },
      ),
      { freq: 8 },
    ),
    cookie: fc.option(
      fc.oneof(
        { weight: 4, arbitrary: fc.constantFrom(...world.cookies) },
        fc.constantFrom('other_app_pref=100%', 'console_session=%E0%A4%A', 'console_login_csrf=x'),
        latin.map((s) => `console_session=${s}`),
        latin,
      ),
      { freq: 2 },
    ),
    'content-type': fc.option(
      fc.oneof(
        { weight: 8, arbitrary: fc.constant('application/json') },
        { weight: 2, arbitrary: fc.constantFrom(...CONTENT_TYPES) },
        { weight: 1, arbitrary: latin },
      ),
      { freq: 8 },
    ),
    extra: fc.dictionary(fc.constantFrom(...EXTRA_HEADERS), latin, { maxKeys: 3 }).map((d) => JSON.stringify(d)),
    signature: fc.constantFrom('valid', 'valid', 'valid', 'garbage', 'none'),
  });
}

/** The path with each :param filled. */
function target(route: FuzzRoute, world: FuzzWorld): fc.Arbitrary<string> {
  const names = route.path.match(/:\w+/g) ?? [];
  return fc
    .tuple(fc.array(segment(world), { minLength: names.length, maxLength: names.length }), queryString(route, world))
    .map(([values, query]) => {
      let i = 0;
      return route.path.replace(/:\w+/g, () => values[i++]!) + query;
    });
}

function assemble(
  route: FuzzRoute,
  world: FuzzWorld,
  path: string,
  h: Record<string, string | undefined>,
  payload: Buffer | undefined,
): RawRequest {
  const out: Record<string, string> = { ...(JSON.parse(h.extra!) as Record<string, string>) };
  for (const name of ['authorization', 'cookie', 'content-type'])
    if (h[name] !== undefined && h[name] !== null) out[name] = h[name];
  if (route.form && out['content-type'] === 'application/json')
    out['content-type'] = 'application/x-www-form-urlencoded';
  if (h.signature !== 'none') {
    const ts = new Date().toISOString();
    out['x-zendesk-webhook-signature-timestamp'] = ts;
    out['x-zendesk-webhook-signature'] =
      h.signature === 'valid' ? sign(world.webhookSecret, ts, payload ?? Buffer.alloc(0)) : 'AAAA';
  }
  if (payload !== undefined) out['content-length'] = String(payload.length);
  return { method: route.method, target: path, headers: out, body: payload };
}

/** A request to `route`, as sent. */
export function requestTo(route: FuzzRoute, world: FuzzWorld): fc.Arbitrary<RawRequest> {
  return fc
    .tuple(target(route, world), headers(route, world), body(route))
    .map(([path, h, payload]) => assemble(route, world, path, h, payload));
}
