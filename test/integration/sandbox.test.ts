/**
 * The sandbox over real HTTP: idempotency semantics, every fault kind, the
 * reconciliation lookup and the admin API. One server per file, reset
 * before each test, and a fresh key per test.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import * as admin from '../../sandbox/adminClient.js';
import { startSandbox, type SandboxHandle } from '../../sandbox/server.js';
import type { FaultRule, LookupResult, SandboxRecord } from '../../sandbox/types.js';

let sb: SandboxHandle;
beforeAll(async () => {
  sb = await startSandbox({ port: 0, seed: 42 });
});
afterAll(async () => {
  await sb.close();
});
beforeEach(() => sb.reset());

const newKey = () => `k-${randomUUID()}`;

interface PostOpts {
  key?: string | null;
  requestId?: string;
  signal?: AbortSignal;
  raw?: string;
}

function post(resource: string, body: unknown, opts: PostOpts = {}): Promise<Response> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (opts.key !== null) headers['idempotency-key'] = opts.key ?? newKey();
  if (opts.requestId) headers['x-request-id'] = opts.requestId;
  return fetch(`${sb.url}/v1/${resource}`, {
    method: 'POST',
    headers,
    body: opts.raw ?? JSON.stringify(body),
    signal: opts.signal,
  });
}

async function lookup(resource: string, param: 'idempotency_key' | 'request_id', value: string): Promise<LookupResult> {
  const res = await fetch(`${sb.url}/v1/${resource}?${param}=${encodeURIComponent(value)}`);
  expect(res.status).toBe(200);
  return (await res.json()) as LookupResult;
}

describe('idempotent create', () => {
  it('commits a record, then replays it for the same key and body', async () => {
    const key = newKey();
    const first = await post('tickets', { subject: 'hi', tags: ['a'] }, { key, requestId: 'req-1' });
    expect(first.status).toBe(201);
    const rec = (await first.json()) as SandboxRecord;
    expect(rec).toMatchObject({ resource: 'tickets', status: 'committed', idempotency_key: key, request_id: 'req-1' });
    expect(rec.id).toMatch(/^tkt_\d+$/);
    expect(new Date(rec.created_at).toISOString()).toBe(rec.created_at);

    // Same body with another key order: canonical JSON makes it the same request.
    const again = await post('tickets', { tags: ['a'], subject: 'hi' }, { key });
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await again.json()).toEqual(rec);

    const counts = sb.counts();
    expect(counts.byResource.tickets).toEqual({ records: 1, byKey: { [key]: 1 } });
    expect(counts.duplicates).toBe(0);
  });

  it('gives deterministic counter ids per resource', async () => {
    const ids = [];
    for (const r of ['tickets', 'emails', 'refunds', 'tickets']) {
      ids.push(((await (await post(r, { n: 1 })).json()) as SandboxRecord).id);
    }
    expect(ids).toEqual(['tkt_000001', 'em_000001', 'rf_000001', 'tkt_000002']);
  });

  it('refuses a reused key with a different body (422)', async () => {
    const key = newKey();
    expect((await post('emails', { to: 'a@x.io' }, { key })).status).toBe(201);
    const res = await post('emails', { to: 'b@x.io' }, { key });
    expect(res.status).toBe(422);
    expect(await res.json()).toEqual({ error: 'idempotency_key_reused' });
    expect(sb.counts().byResource.emails.records).toBe(1);
  });

  it('validates the key and the body (400)', async () => {
    const noKey = await post('tickets', { a: 1 }, { key: null });
    expect(noKey.status).toBe(400);
    expect(await noKey.json()).toEqual({ error: 'idempotency_key_required' });
    const arr = await post('tickets', [1, 2]);
    expect(await arr.json()).toEqual({ error: 'body_must_be_json_object' });
    const bad = await post('tickets', null, { raw: '{nope' });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ error: 'invalid_json' });
    expect(sb.counts().byResource.tickets.records).toBe(0);
  });

  it('commits once for concurrent requests with one key', async () => {
    const key = newKey();
    const results = await Promise.all(Array.from({ length: 20 }, () => post('refunds', { amount: 5 }, { key })));
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    expect(statuses.every((s) => s === 201 || s === 200 || s === 409)).toBe(true);
    expect(sb.counts().byResource.refunds).toEqual({ records: 1, byKey: { [key]: 1 } });
  });

  it('answers 409 while the first request with the key is still processing', async () => {
    sb.setFaults([{ kind: 'slow_commit', ms: 150, count: 1 }]);
    const key = newKey();
    const first = post('refunds', { amount: 5 }, { key });
    await vi.waitFor(async () => expect((await lookup('refunds', 'idempotency_key', key)).status).toBe('processing'));
    const second = await post('refunds', { amount: 5 }, { key });
    // The first is normally the one admitted; either way one commits and the other sees 409.
    const statuses = [(await first).status, second.status].sort();
    expect(statuses).toEqual([201, 409]);
    expect(await (second.status === 409 ? second : await first).json()).toEqual({ error: 'request_in_progress' });
    expect(sb.counts().byResource.refunds.records).toBe(1);
  });
});

describe('reconciliation lookup', () => {
  it('says absent and stopped for an unknown key or request id', async () => {
    expect(await lookup('tickets', 'idempotency_key', newKey())).toEqual({ status: 'absent', stopped: true });
    expect(await lookup('tickets', 'request_id', 'nope')).toEqual({ status: 'absent', stopped: true });
  });

  it('finds a committed record by key, by request id and by id', async () => {
    const key = newKey();
    const rec = (await (await post('emails', { to: 'a@x.io' }, { key, requestId: 'r-9' })).json()) as SandboxRecord;
    expect(await lookup('emails', 'idempotency_key', key)).toEqual({ status: 'committed', record: rec, records: 1 });
    expect(await lookup('emails', 'request_id', 'r-9')).toEqual({ status: 'committed', record: rec });
    // Keys are per resource.
    expect((await lookup('tickets', 'idempotency_key', key)).status).toBe('absent');
    const byId = await fetch(`${sb.url}/v1/emails/${rec.id}`);
    expect(await byId.json()).toEqual(rec);
    expect((await fetch(`${sb.url}/v1/emails/em_999999`)).status).toBe(404);
  });

  it('needs a key or a request id (400)', async () => {
    expect((await fetch(`${sb.url}/v1/tickets`)).status).toBe(400);
  });
});

describe('faults', () => {
  it('rate_limit: 429 with Retry-After, nothing kept; spent after count', async () => {
    sb.setFaults([{ kind: 'rate_limit', retryAfterS: 2, count: 1 }]);
    const key = newKey();
    const limited = await post('tickets', { a: 1 }, { key });
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('2');
    expect(await lookup('tickets', 'idempotency_key', key)).toEqual({ status: 'absent', stopped: true });
    expect((await post('tickets', { a: 1 }, { key })).status).toBe(201);
    expect(sb.counts().byResource.tickets.records).toBe(1);
  });

  it('unavailable: 503, nothing kept', async () => {
    sb.setFaults([{ kind: 'unavailable', resource: 'emails' }]);
    expect((await post('emails', { a: 1 })).status).toBe(503);
    expect((await post('tickets', { a: 1 })).status).toBe(201); // other resources unaffected
    expect(sb.counts().byResource.emails.records).toBe(0);
  });

  it('refuse_before_commit: the socket drops, lookup proves absent and stopped', async () => {
    sb.setFaults([{ kind: 'refuse_before_commit', count: 1 }]);
    const key = newKey();
    await expect(post('refunds', { amount: 1 }, { key, requestId: 'rq-1' })).rejects.toThrow();
    expect(await lookup('refunds', 'idempotency_key', key)).toEqual({ status: 'absent', stopped: true });
    expect(await lookup('refunds', 'request_id', 'rq-1')).toEqual({ status: 'absent', stopped: true });
    expect(sb.counts().byResource.refunds.records).toBe(0);
    expect((await post('refunds', { amount: 1 }, { key })).status).toBe(201);
  });

  it('lost_response_after_commit: fetch rejects, yet the record is committed once', async () => {
    sb.setFaults([{ kind: 'lost_response_after_commit', count: 1 }]);
    const key = newKey();
    await expect(post('refunds', { amount: 7 }, { key })).rejects.toThrow();
    const found = await lookup('refunds', 'idempotency_key', key);
    expect(found.status).toBe('committed');
    const retry = await post('refunds', { amount: 7 }, { key });
    expect(retry.status).toBe(200);
    expect(((await retry.json()) as SandboxRecord).id).toBe(found.status === 'committed' ? found.record.id : '');
    expect(sb.counts().byResource.refunds).toEqual({ records: 1, byKey: { [key]: 1 } });
  });

  it('error_after_commit: 500, but the record is committed', async () => {
    sb.setFaults([{ kind: 'error_after_commit', count: 1 }]);
    const key = newKey();
    expect((await post('tickets', { a: 1 }, { key })).status).toBe(500);
    expect((await lookup('tickets', 'idempotency_key', key)).status).toBe('committed');
    expect((await post('tickets', { a: 1 }, { key })).status).toBe(200);
    expect(sb.counts().byResource.tickets.records).toBe(1);
  });

  it('slow_commit: the client times out, lookup says processing, then the commit lands', async () => {
    sb.setFaults([{ kind: 'slow_commit', ms: 400 }]);
    const key = newKey();
    await expect(post('emails', { to: 'a@x.io' }, { key, requestId: 'slow-1', signal: AbortSignal.timeout(30) })).rejects.toThrow();
    expect(await lookup('emails', 'idempotency_key', key)).toEqual({ status: 'processing' });
    expect(await lookup('emails', 'request_id', 'slow-1')).toEqual({ status: 'processing' });
    await vi.waitFor(async () => expect((await lookup('emails', 'idempotency_key', key)).status).toBe('committed'), {
      timeout: 2000,
      interval: 20,
    });
    expect((await lookup('emails', 'request_id', 'slow-1')).status).toBe('committed');
    expect(sb.counts().byResource.emails.records).toBe(1);
  });

  it('malformed_response: 201 whose body is not JSON, record committed', async () => {
    sb.setFaults([{ kind: 'malformed_response', count: 1 }]);
    const key = newKey();
    const res = await post('tickets', { a: 1 }, { key });
    expect(res.status).toBe(201);
    await expect(res.json()).rejects.toThrow();
    expect((await lookup('tickets', 'idempotency_key', key)).status).toBe('committed');
  });

  it('ignore_keys: a retry with the same key creates a second record, counted as a duplicate', async () => {
    sb.setFaults([{ kind: 'ignore_keys' }]);
    const key = newKey();
    const a = (await (await post('refunds', { amount: 3 }, { key })).json()) as SandboxRecord;
    const second = await post('refunds', { amount: 3 }, { key });
    expect(second.status).toBe(201);
    const b = (await second.json()) as SandboxRecord;
    expect(b.id).not.toBe(a.id);
    const counts = sb.counts();
    expect(counts.byResource.refunds).toEqual({ records: 2, byKey: { [key]: 2 } });
    expect(counts.duplicates).toBe(1);
    expect(counts.duplicateKeys).toEqual([key]);
    // Lookup still answers with the first record under the key.
    const found = await lookup('refunds', 'idempotency_key', key);
    expect(found.status === 'committed' && found.record.id).toBe(a.id);
  });

  it('no_lookup: 501 for that resource only', async () => {
    sb.setFaults([{ kind: 'no_lookup', resource: 'tickets' }]);
    const res = await fetch(`${sb.url}/v1/tickets?idempotency_key=x`);
    expect(res.status).toBe(501);
    expect(await res.json()).toEqual({ error: 'lookup_unsupported' });
    expect((await lookup('emails', 'idempotency_key', 'x')).status).toBe('absent');
  });

  it('rules are checked in order and a spent rule stops firing', async () => {
    sb.setFaults([
      { kind: 'unavailable', count: 1 },
      { kind: 'rate_limit', count: 1 },
    ]);
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await post('tickets', { i })).status);
    expect(statuses).toEqual([503, 429, 201]);
  });

  it('probabilistic faults repeat exactly for the same seed', async () => {
    const rules: FaultRule[] = [{ kind: 'unavailable', probability: 0.5 }];
    const run = async (s: SandboxHandle) => {
      s.setFaults(rules);
      const out: number[] = [];
      for (let i = 0; i < 24; i++) {
        const res = await fetch(`${s.url}/v1/tickets`, {
          method: 'POST',
          headers: { 'idempotency-key': `p-${i}` },
          body: '{}',
        });
        out.push(res.status);
      }
      return out;
    };
    const other = await startSandbox({ seed: 42 });
    try {
      const a = await run(sb);
      const b = await run(other);
      expect(a).toEqual(b);
      expect(a).toContain(503);
      expect(a).toContain(201);
      sb.reset(); // reset restarts the PRNG: the same sequence again
      expect(await run(sb)).toEqual(a);
    } finally {
      await other.close();
    }
  });

  it('read endpoints are faulted only by rules that name them', async () => {
    sb.setFaults([{ kind: 'rate_limit' }]);
    expect((await fetch(`${sb.url}/v1/kb?q=refund`)).status).toBe(200);
    sb.setFaults([{ kind: 'rate_limit', resource: 'kb', count: 1 }]);
    expect((await fetch(`${sb.url}/v1/kb?q=refund`)).status).toBe(429);
    expect((await fetch(`${sb.url}/v1/kb?q=refund`)).status).toBe(200);
  });
});

describe('read endpoints', () => {
  it('kb search is deterministic per query', async () => {
    const a = await (await fetch(`${sb.url}/v1/kb?q=Refund%20please`)).json();
    const b = await (await fetch(`${sb.url}/v1/kb?q=refund please`)).json();
    expect(a).toEqual(b);
    expect((a as { articles: unknown[] }).articles).toHaveLength(3);
    expect((await fetch(`${sb.url}/v1/kb`)).status).toBe(400);
  });

  it('customer profiles are deterministic; "unknown…" is not found', async () => {
    const url = `${sb.url}/v1/customers/${encodeURIComponent('jane.doe@example.com')}`;
    const a = (await (await fetch(url)).json()) as { name: string; id: string };
    expect(a.name).toBe('Jane Doe');
    expect(await (await fetch(url)).json()).toEqual(a);
    expect((await fetch(`${sb.url}/v1/customers/unknown@example.com`)).status).toBe(404);
    expect((await fetch(`${sb.url}/v1/customers/not-an-email`)).status).toBe(400);
  });
});

describe('admin API', () => {
  it('sets, adds and clears faults, reads counts and resets over HTTP', async () => {
    await admin.setFaults(sb.url, [{ kind: 'unavailable', count: 1 }]);
    await admin.addFaults(sb.url, [{ kind: 'rate_limit', count: 1 }]);
    expect((await post('tickets', { a: 1 })).status).toBe(503);
    expect((await post('tickets', { a: 1 })).status).toBe(429);
    await admin.setFaults(sb.url, [{ kind: 'unavailable' }]);
    await admin.clearFaults(sb.url);
    const key = newKey();
    expect((await post('tickets', { a: 1 }, { key })).status).toBe(201);

    const counts = await admin.getCounts(sb.url);
    expect(counts.requests).toBe(3);
    expect(counts.byResource.tickets).toEqual({ records: 1, byKey: { [key]: 1 } });

    await admin.reset(sb.url);
    const after = await admin.getCounts(sb.url);
    expect(after).toEqual({
      requests: 0,
      byResource: {
        tickets: { records: 0, byKey: {} },
        emails: { records: 0, byKey: {} },
        refunds: { records: 0, byKey: {} },
      },
      duplicates: 0,
      duplicateKeys: [],
    });
    expect(await lookup('tickets', 'idempotency_key', key)).toEqual({ status: 'absent', stopped: true });
  });

  it('rejects malformed fault rules with 400', async () => {
    const err = await admin.setFaults(sb.url, [{ kind: 'explode' } as unknown as FaultRule]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(admin.SandboxAdminError);
    expect((err as admin.SandboxAdminError).status).toBe(400);
    expect(() => sb.setFaults([{ kind: 'rate_limit', probability: 2 }])).toThrow();
  });

  it('answers healthz', async () => {
    expect((await fetch(`${sb.url}/healthz`)).status).toBe(200);
  });
});
