/**
 * The sandbox over real HTTP, on each vendor's wire: Zendesk tickets, Resend
 * emails, Stripe refunds (auth, bodies, status codes, error shapes, replay
 * markers, key windows), every fault kind, the read endpoints and the admin
 * API. One server per file, reset before each test, a fresh key per test.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { until } from '../../testkit/until.js';
import * as admin from '../../sandbox/adminClient.js';
import { startSandbox, type SandboxHandle } from '../../sandbox/server.js';
import type { EffectResource, FaultRule } from '../../sandbox/types.js';

let sb: SandboxHandle;
beforeAll(async () => {
  sb = await startSandbox({ port: 0, seed: 42 });
});
afterAll(async () => {
  await sb.close();
});
beforeEach(() => sb.reset());

const newKey = () => `k-${randomUUID()}`;
const ZENDESK_AUTH = `Basic ${Buffer.from('agent@example.com/token:secret').toString('base64')}`;

interface Opts {
  key?: string | null;
  signal?: AbortSignal;
  auth?: string | null;
}

/** One create on the vendor's own wire. `body` is the vendor's body (a form for Stripe). */
function create(resource: EffectResource, body: Record<string, unknown>, opts: Opts = {}): Promise<Response> {
  const key: Record<string, string> = opts.key === null ? {} : { 'idempotency-key': opts.key ?? newKey() };
  const init = (path: string, auth: string, contentType: string, payload: string) =>
    fetch(`${sb.url}${path}`, {
      method: 'POST',
      signal: opts.signal,
      headers: {
        'content-type': contentType,
        ...key,
        ...(opts.auth === null ? {} : { authorization: opts.auth ?? auth }),
      } as Record<string, string>,
      body: payload,
    });
  if (resource === 'tickets')
    return init('/api/v2/tickets.json', ZENDESK_AUTH, 'application/json', JSON.stringify({ ticket: body }));
  if (resource === 'emails') return init('/emails', 'Bearer re_test', 'application/json', JSON.stringify(body));
  return init(
    '/v1/refunds',
    'Bearer sk_test_x',
    'application/x-www-form-urlencoded',
    new URLSearchParams(body as Record<string, string>).toString(),
  );
}

const ticket = (subject = 'Broken mug') => ({
  subject,
  comment: { body: 'It arrived shattered.', public: false },
  priority: 'normal',
});
const email = (to = 'ada@example.com') => ({
  from: 'Support <support@example.com>',
  to: [to],
  subject: 'Re: broken mug',
  text: 'We are on it.',
});
const refund = (amount = '500') => ({
  payment_intent: 'pi_123',
  amount,
  currency: 'eur',
  'metadata[action_id]': 'a_1',
});
const sample: Record<EffectResource, () => Record<string, unknown>> = {
  tickets: ticket,
  emails: email,
  refunds: refund,
};

describe('Zendesk tickets (/api/v2)', () => {
  it('creates with 201 {ticket, audit} and x-idempotency-lookup: miss, then replays the same key and body with hit', async () => {
    const key = newKey();
    const first = await create('tickets', { ...ticket(), external_id: 'a_ext_1' }, { key });
    expect(first.status).toBe(201);
    expect(first.headers.get('x-idempotency-lookup')).toBe('miss');
    const body = (await first.json()) as {
      ticket: { id: number; external_id: string; status: string; description: string };
      audit: unknown;
    };
    expect(body.ticket).toMatchObject({
      id: 1,
      external_id: 'a_ext_1',
      status: 'new',
      description: 'It arrived shattered.',
    });
    expect(body.audit).toBeDefined();

    // The same body with its keys in another order is the same request.
    const again = await fetch(`${sb.url}/api/v2/tickets.json`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key, authorization: ZENDESK_AUTH },
      body: JSON.stringify({
        ticket: {
          external_id: 'a_ext_1',
          priority: 'normal',
          comment: { public: false, body: 'It arrived shattered.' },
          subject: 'Broken mug',
        },
      }),
    });
    expect(again.status).toBe(201);
    expect(again.headers.get('x-idempotency-lookup')).toBe('hit');
    expect(await again.json()).toEqual(body);
    expect(sb.counts().byResource.tickets).toEqual({ records: 1, byKey: { [key]: 1 } });
  });

  it('same key, other body: 400 IdempotentRequestError, nothing created', async () => {
    const key = newKey();
    expect((await create('tickets', ticket('A'), { key })).status).toBe(201);
    const res = await create('tickets', ticket('B'), { key });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      error: 'IdempotentRequestError',
      description: "Request parameters don't match the given idempotency key",
    });
    expect(sb.counts().byResource.tickets.records).toBe(1);
  });

  it('lists by external_id, shows one, adds a comment by PUT and lists the comments', async () => {
    await create('tickets', { ...ticket(), external_id: 'a_ext_2' });
    await create('tickets', { ...ticket('Other'), external_id: 'a_other' });
    const auth = { authorization: ZENDESK_AUTH };
    const list = (await (
      await fetch(`${sb.url}/api/v2/tickets.json?external_id=a_ext_2`, { headers: auth })
    ).json()) as { tickets: { id: number }[]; count: number };
    expect(list.count).toBe(1);
    const id = list.tickets[0]!.id;
    expect(
      (
        (await (await fetch(`${sb.url}/api/v2/tickets/${id}.json`, { headers: auth })).json()) as {
          ticket: { id: number };
        }
      ).ticket.id,
    ).toBe(id);
    const put = await fetch(`${sb.url}/api/v2/tickets/${id}.json`, {
      method: 'PUT',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ ticket: { comment: { body: 'Replacement shipped.', public: true } } }),
    });
    expect(put.status).toBe(200);
    const comments = (await (
      await fetch(`${sb.url}/api/v2/tickets/${id}/comments.json`, { headers: auth })
    ).json()) as { comments: { body: string }[] };
    expect(comments.comments.map((c) => c.body)).toEqual(['It arrived shattered.', 'Replacement shipped.']);
    expect((await fetch(`${sb.url}/api/v2/tickets/999.json`, { headers: auth })).status).toBe(404);
  });

  it('takes basic email/token:TOKEN and Bearer OAuth; anything else is 401', async () => {
    expect((await create('tickets', ticket(), { auth: 'Bearer oauth-access-token' })).status).toBe(201);
    const none = await create('tickets', ticket(), { auth: null });
    expect(none.status).toBe(401);
    expect(await none.json()).toEqual({ error: "Couldn't authenticate you" });
    const password = `Basic ${Buffer.from('agent@example.com:password').toString('base64')}`;
    expect((await create('tickets', ticket(), { auth: password })).status).toBe(401);
    expect((await fetch(`${sb.url}/api/v2/tickets.json?external_id=x`)).status).toBe(401);
    expect(sb.counts().byResource.tickets.records).toBe(1);
  });

  it('validates: no ticket 400, no comment 422, a key over 255 characters 400', async () => {
    const noTicket = await fetch(`${sb.url}/api/v2/tickets.json`, {
      method: 'POST',
      headers: { authorization: ZENDESK_AUTH, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(noTicket.status).toBe(400);
    const noComment = await create('tickets', { subject: 'x' });
    expect(noComment.status).toBe(422);
    expect(((await noComment.json()) as { error: string }).error).toBe('RecordInvalid');
    expect((await create('tickets', ticket(), { key: 'k'.repeat(256) })).status).toBe(400);
    expect((await create('tickets', ticket(), { key: 'k'.repeat(255) })).status).toBe(201);
    expect(sb.counts().byResource.tickets.records).toBe(1);
  });
});

describe('Resend emails (/emails)', () => {
  it('sends with 200 {id}; the same key and body answer the same id and send nothing (no replay header)', async () => {
    const key = newKey();
    const first = await create('emails', email(), { key });
    expect(first.status).toBe(200);
    const { id } = (await first.json()) as { id: string };
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    const again = await create('emails', email(), { key });
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual({ id });
    expect(again.headers.get('idempotent-replayed')).toBeNull();
    const got = (await (
      await fetch(`${sb.url}/emails/${id}`, { headers: { authorization: 'Bearer re_test' } })
    ).json()) as Record<string, unknown>;
    expect(got).toMatchObject({
      object: 'email',
      id,
      to: ['ada@example.com'],
      subject: 'Re: broken mug',
      text: 'We are on it.',
      last_event: 'delivered',
    });
    expect(sb.counts().byResource.emails).toEqual({ records: 1, byKey: { [key]: 1 } });
  });

  it('same key, other body: 409 invalid_idempotent_request; while in progress: 409 concurrent_idempotent_requests', async () => {
    const key = newKey();
    expect((await create('emails', email('a@example.com'), { key })).status).toBe(200);
    const other = await create('emails', email('b@example.com'), { key });
    expect(other.status).toBe(409);
    expect(await other.json()).toMatchObject({ statusCode: 409, name: 'invalid_idempotent_request' });

    sb.setFaults([{ kind: 'slow_commit', resource: 'emails', ms: 400, count: 1 }]);
    const slowKey = newKey();
    const slow = create('emails', email(), { key: slowKey });
    await until('the first request held', 5000, () => sb.held() === 1);
    const concurrent = await create('emails', email(), { key: slowKey });
    expect(concurrent.status).toBe(409);
    expect(await concurrent.json()).toMatchObject({ name: 'concurrent_idempotent_requests' });
    expect((await slow).status).toBe(200);
    expect(sb.counts().byResource.emails.byKey[slowKey]).toBe(1);
  });

  it('auth: missing 401 missing_api_key, not re_ 403 invalid_api_key; fields: 422 missing_required_field; key over 256: 400', async () => {
    expect(await (await create('emails', email(), { auth: null })).json()).toMatchObject({
      statusCode: 401,
      name: 'missing_api_key',
    });
    expect(await (await create('emails', email(), { auth: 'Bearer sk_nope' })).json()).toMatchObject({
      statusCode: 403,
      name: 'invalid_api_key',
    });
    const { from: _from, ...noFrom } = email();
    expect(await (await create('emails', noFrom)).json()).toMatchObject({
      statusCode: 422,
      name: 'missing_required_field',
    });
    const { text: _text, ...noBody } = email();
    expect((await create('emails', noBody)).status).toBe(422);
    expect(await (await create('emails', email(), { key: 'k'.repeat(257) })).json()).toMatchObject({
      statusCode: 400,
      name: 'invalid_idempotency_key',
    });
    expect(sb.counts().byResource.emails.records).toBe(0);
  });

  it('a replay after the 24 h window sends a second email (the sandbox clock moves; counted as a duplicate)', async () => {
    const key = newKey();
    const first = (await (await create('emails', email(), { key })).json()) as { id: string };
    sb.advanceClock(24 * 3600_000 - 1000);
    expect(await (await create('emails', email(), { key })).json()).toEqual(first);
    await admin.advanceClock(sb.url, 1000);
    const late = (await (await create('emails', email(), { key })).json()) as { id: string };
    expect(late.id).not.toBe(first.id);
    expect(sb.counts().byResource.emails.byKey[key]).toBe(2);
    expect(sb.counts().duplicates).toBe(1);
  });
});

describe('Stripe refunds (/v1/refunds, form-encoded)', () => {
  it('creates a refund object; the same key and parameters answer it with Idempotent-Replayed: true', async () => {
    const key = newKey();
    const first = await create('refunds', refund(), { key });
    expect(first.status).toBe(200);
    const body = (await first.json()) as Record<string, unknown>;
    expect(body).toMatchObject({
      object: 'refund',
      amount: 500,
      currency: 'eur',
      payment_intent: 'pi_123',
      status: 'succeeded',
      metadata: { action_id: 'a_1' },
    });
    expect(String(body.id)).toMatch(/^re_/);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const again = await create('refunds', refund(), { key });
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await again.json()).toEqual(body);
    expect(sb.counts().byResource.refunds).toEqual({ records: 1, byKey: { [key]: 1 } });
  });

  it('other parameters: 400 idempotency_error; concurrent: 409 idempotency_key_in_use; lists by payment_intent', async () => {
    const key = newKey();
    await create('refunds', refund('500'), { key });
    const other = await create('refunds', refund('600'), { key });
    expect(other.status).toBe(400);
    expect(((await other.json()) as { error: { type: string } }).error.type).toBe('idempotency_error');
    sb.setFaults([{ kind: 'conflict_in_progress', resource: 'refunds', count: 1 }]);
    const busy = await create('refunds', refund('700'));
    expect(busy.status).toBe(409);
    expect(((await busy.json()) as { error: { code: string } }).error.code).toBe('idempotency_key_in_use');
    const list = (await (
      await fetch(`${sb.url}/v1/refunds?payment_intent=pi_123`, { headers: { authorization: 'Bearer sk_test_x' } })
    ).json()) as { object: string; data: { amount: number }[] };
    expect(list.object).toBe('list');
    expect(list.data.map((r) => r.amount)).toEqual([500]);
  });

  it('auth (Bearer or basic sk_ key), parameters and the error shape {error: {type, code, message}}', async () => {
    expect(
      (await create('refunds', refund(), { auth: `Basic ${Buffer.from('sk_test_x:').toString('base64')}` })).status,
    ).toBe(200);
    const none = await create('refunds', refund(), { auth: null });
    expect(none.status).toBe(401);
    expect(((await none.json()) as { error: { type: string } }).error.type).toBe('invalid_request_error');
    expect((await create('refunds', { amount: '5' })).status).toBe(400);
    expect(((await (await create('refunds', refund('-3'))).json()) as { error: { code: string } }).error.code).toBe(
      'parameter_invalid_integer',
    );
    expect(
      ((await (await create('refunds', { ...refund(), bogus: '1' })).json()) as { error: { code: string } }).error.code,
    ).toBe('parameter_unknown');
    expect(sb.counts().byResource.refunds.records).toBe(1);
  });

  it('rate_limit: 429 in Stripe shape with Retry-After, nothing kept; spent after its count', async () => {
    sb.setFaults([{ kind: 'rate_limit', resource: 'refunds', count: 1, retryAfterS: 2 }]);
    const key = newKey();
    const limited = await create('refunds', refund(), { key });
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('2');
    expect(((await limited.json()) as { error: { code: string } }).error.code).toBe('rate_limit');
    const ok = await create('refunds', refund(), { key });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('idempotent-replayed')).toBeNull();
    expect(sb.counts().byResource.refunds.records).toBe(1);
  });
});

describe('faults', () => {
  it('deterministic ids per resource, repeated after a reset', async () => {
    const ids = async () => [
      ((await (await create('tickets', ticket())).json()) as { ticket: { id: number } }).ticket.id,
      ((await (await create('emails', email())).json()) as { id: string }).id,
      ((await (await create('refunds', refund())).json()) as { id: string }).id,
    ];
    const a = await ids();
    sb.reset();
    expect(await ids()).toEqual(a);
  });

  it('unavailable: 503, nothing kept', async () => {
    sb.setFaults([{ kind: 'unavailable', resource: 'emails', count: 1 }]);
    const key = newKey();
    expect((await create('emails', email(), { key })).status).toBe(503);
    expect(sb.counts().byResource.emails.records).toBe(0);
    expect((await create('emails', email(), { key })).status).toBe(200);
  });

  it('refuse_before_commit: the socket drops and nothing is kept; the key is free for the retry', async () => {
    sb.setFaults([{ kind: 'refuse_before_commit', resource: 'tickets', count: 1 }]);
    const key = newKey();
    await expect(create('tickets', ticket(), { key })).rejects.toThrow();
    expect(sb.counts().byResource.tickets.records).toBe(0);
    const retry = await create('tickets', ticket(), { key });
    expect(retry.status).toBe(201);
    expect(retry.headers.get('x-idempotency-lookup')).toBe('miss');
  });

  it('lost_response_after_commit: the request fails, yet the email is sent once; the replay answers its id', async () => {
    sb.setFaults([{ kind: 'lost_response_after_commit', resource: 'emails', count: 1 }]);
    const key = newKey();
    await expect(create('emails', email(), { key })).rejects.toThrow();
    expect(sb.counts().byResource.emails.byKey[key]).toBe(1);
    expect((await create('emails', email(), { key })).status).toBe(200);
    expect(sb.counts().byResource.emails.byKey[key]).toBe(1);
  });

  it('error_after_commit: Zendesk answers 500, but the ticket exists and is found by external_id', async () => {
    sb.setFaults([{ kind: 'error_after_commit', resource: 'tickets', count: 1 }]);
    const res = await create('tickets', { ...ticket(), external_id: 'a_err' });
    expect(res.status).toBe(500);
    const list = (await (
      await fetch(`${sb.url}/api/v2/tickets.json?external_id=a_err`, { headers: { authorization: ZENDESK_AUTH } })
    ).json()) as { count: number };
    expect(list.count).toBe(1);
  });

  it('list_lag: the list by external_id does not show yet a ticket that exists', async () => {
    await create('tickets', { ...ticket(), external_id: 'a_lag' });
    sb.setFaults([{ kind: 'list_lag', resource: 'tickets', count: 1 }]);
    const url = `${sb.url}/api/v2/tickets.json?external_id=a_lag`;
    expect(
      ((await (await fetch(url, { headers: { authorization: ZENDESK_AUTH } })).json()) as { count: number }).count,
    ).toBe(0);
    expect(
      ((await (await fetch(url, { headers: { authorization: ZENDESK_AUTH } })).json()) as { count: number }).count,
    ).toBe(1);
  });

  it('slow_commit: the client gives up, the commit still lands once', async () => {
    sb.setFaults([{ kind: 'slow_commit', resource: 'refunds', ms: 300, count: 1 }]);
    const key = newKey();
    await expect(create('refunds', refund(), { key, signal: AbortSignal.timeout(50) })).rejects.toThrow();
    // Nothing held any more: the commit has landed, and nothing else can.
    await until('the slow commit made', 5000, () => sb.held() === 0);
    expect(sb.counts().byResource.refunds.byKey[key]).toBe(1);
  });

  it('malformed_response: half a body, the effect committed', async () => {
    sb.setFaults([{ kind: 'malformed_response', resource: 'tickets', count: 1 }]);
    const res = await create('tickets', ticket());
    expect(res.status).toBe(201);
    await expect(res.json()).rejects.toThrow();
    expect(sb.counts().byResource.tickets.records).toBe(1);
  });

  it('ignore_keys: a same-key retry creates a second effect, counted as a duplicate', async () => {
    sb.setFaults([{ kind: 'ignore_keys' }]);
    const key = newKey();
    await create('refunds', refund(), { key });
    await create('refunds', refund(), { key });
    const counts = sb.counts();
    expect(counts.byResource.refunds).toEqual({ records: 2, byKey: { [key]: 2 } });
    expect(counts.duplicates).toBe(1);
    expect(counts.duplicateKeys).toEqual([key]);
  });

  it('no_lookup: the lists answer 500 and a known key answers 500 without processing', async () => {
    const key = newKey();
    await create('refunds', refund(), { key });
    sb.setFaults([
      { kind: 'no_lookup', resource: 'refunds' },
      { kind: 'no_lookup', resource: 'tickets' },
    ]);
    expect(
      (await fetch(`${sb.url}/v1/refunds?payment_intent=pi_123`, { headers: { authorization: 'Bearer sk_test_x' } }))
        .status,
    ).toBe(500);
    expect((await create('refunds', refund(), { key })).status).toBe(500);
    expect((await create('refunds', refund())).status).toBe(200); // a new key is processed
    expect(
      (await fetch(`${sb.url}/api/v2/tickets.json?external_id=x`, { headers: { authorization: ZENDESK_AUTH } })).status,
    ).toBe(500);
    expect(sb.counts().byResource.refunds.records).toBe(2);
  });

  it('every effect resource answers a concurrent burst with one key once', async () => {
    for (const resource of ['tickets', 'emails', 'refunds'] as const) {
      const key = newKey();
      const results = await Promise.all(
        Array.from({ length: 20 }, () => create(resource, sample[resource](), { key })),
      );
      expect(results.every((r) => r.status === 200 || r.status === 201 || r.status === 409)).toBe(true);
      expect(sb.counts().byResource[resource].byKey[key]).toBe(1);
    }
  });

  it('rules are checked in order and a spent rule stops firing', async () => {
    sb.setFaults([
      { kind: 'unavailable', count: 1 },
      { kind: 'rate_limit', count: 1 },
    ]);
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await create('tickets', ticket(`t${i}`))).status);
    expect(statuses).toEqual([503, 429, 201]);
  });

  it('probabilistic faults repeat exactly for the same seed', async () => {
    const rules: FaultRule[] = [{ kind: 'unavailable', probability: 0.5 }];
    const run = async (s: SandboxHandle) => {
      s.setFaults(rules);
      const out: number[] = [];
      for (let i = 0; i < 24; i++) {
        const res = await fetch(`${s.url}/emails`, {
          method: 'POST',
          headers: { 'idempotency-key': `p-${i}`, authorization: 'Bearer re_x', 'content-type': 'application/json' },
          body: JSON.stringify(email()),
        });
        out.push(res.status);
      }
      return out;
    };
    const other = await startSandbox({ seed: 42 });
    try {
      const a = await run(sb);
      expect(await run(other)).toEqual(a);
      expect(a).toContain(503);
      expect(a).toContain(200);
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
  it('sets, adds and clears faults, reads counts, sets a key window and resets over HTTP', async () => {
    await admin.setFaults(sb.url, [{ kind: 'unavailable', count: 1 }]);
    await admin.addFaults(sb.url, [{ kind: 'rate_limit', count: 1 }]);
    expect((await create('tickets', ticket())).status).toBe(503);
    expect((await create('tickets', ticket())).status).toBe(429);
    await admin.setFaults(sb.url, [{ kind: 'unavailable' }]);
    await admin.clearFaults(sb.url);
    const key = newKey();
    expect((await create('tickets', ticket(), { key })).status).toBe(201);
    const counts = await admin.getCounts(sb.url);
    expect(counts.requests).toBe(3);
    expect(counts.byResource.tickets).toEqual({ records: 1, byKey: { [key]: 1 } });

    // A short window: a same-key request past it is processed again (Zendesk's would after 2 hours).
    await admin.setKeyWindow(sb.url, 'tickets', 0);
    expect((await create('tickets', ticket(), { key })).headers.get('x-idempotency-lookup')).toBe('miss');
    expect(sb.counts().byResource.tickets.byKey[key]).toBe(2);

    await admin.reset(sb.url);
    expect(await admin.getCounts(sb.url)).toEqual({
      requests: 0,
      byResource: {
        tickets: { records: 0, byKey: {} },
        emails: { records: 0, byKey: {} },
        refunds: { records: 0, byKey: {} },
      },
      duplicates: 0,
      duplicateKeys: [],
    });
    // The reset forgot the key and restored the documented window.
    expect((await create('tickets', ticket(), { key })).headers.get('x-idempotency-lookup')).toBe('miss');
    expect((await create('tickets', ticket(), { key })).headers.get('x-idempotency-lookup')).toBe('hit');
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
