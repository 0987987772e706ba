/**
 * No input answers 5xx: a stray cookie that does not decode, a lone UTF-16 surrogate in any body string,
 * a malformed %-escape in a path parameter. Each is a 4xx (or ignored), writes nothing, logs no error.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createHarness, PRODUCER_TOKEN, sampleTicket, type Harness } from '../../../testkit/harness.js';
import { sign } from '../../../src/producer/webhookSignature.js';
import { keysAddedSince, keySet } from '../../../testkit/keyPrefix.js';
import { final, OPERATOR_TOKEN, operatorHarness, startScripted } from './support.js';

const SECRET = 'acme-webhook-secret';
let h: Harness & { url: string };
beforeAll(async () => {
  h = await operatorHarness('inputs', {
    WEBHOOK_SECRETS: JSON.stringify({ acme: SECRET }),
    CONSOLE_SESSION_SECRET: 'x'.repeat(32),
  });
});
afterAll(async () => {
  await h.close();
});

const keys = () => keySet(h.ctx.redis, h.cfg.KEY_PREFIX, h.cfg.BULL_PREFIX);

/**
 * Keys written since `before` (keysAddedSince: not what the fleet writes on its own, such as the owner watch's scan),
 * leaving out the finished run of the cookie test (its retention may still land).
 */
async function written(before: Set<string>): Promise<string[]> {
  const added = await keysAddedSince(h.ctx.redis, before, h.cfg.KEY_PREFIX, h.cfg.BULL_PREFIX);
  return added.filter((k) => !(cookieRun !== '' && k.includes(cookieRun)));
}

let cookieRun = '';

function signed(raw: string): Record<string, string> {
  const timestamp = new Date().toISOString();
  return {
    'content-type': 'application/json',
    'x-zendesk-webhook-signature': sign(SECRET, timestamp, raw),
    'x-zendesk-webhook-signature-timestamp': timestamp,
  };
}

describe('inputs that once answered 5xx', () => {
  it('a cookie that does not decode is ignored on every route that reads the console session', async () => {
    const runId = (cookieRun = await startScripted(h, [final], 'COOKIE'));
    await h.waitForStatus(runId, ['completed']);
    const paths = [
      '/v1/runs',
      `/v1/runs/${runId}`,
      `/v1/runs/${runId}/events`,
      `/runs/${runId}`,
      '/console/runs',
      '/console/login',
      '/admin/queues',
    ];
    for (const path of paths) {
      const ctl = new AbortController();
      const res = await fetch(`${h.url}${path}`, {
        signal: ctl.signal,
        redirect: 'manual',
        headers: { cookie: 'other_app_pref=100%; console_session=%E0%A4%A' },
      });
      expect(res.status, path).toBeLessThan(500);
      ctl.abort();
    }
    const anonymous = await fetch(`${h.url}/console/login`, { headers: { cookie: 'other_app_pref=100%' } });
    expect(anonymous.status).toBe(200);
  });

  it('a forged session cookie or login CSRF token with more bytes than characters is not logged in, and logs no error', async () => {
    const errors = vi.spyOn(h.ctx.log, 'error');
    try {
      // As long as a real signature in characters (43), twice as long in bytes: 'é' is two bytes in UTF-8.
      const forged = { cookie: `console_session=${'a'.repeat(43)}.${'%C3%A9'.repeat(43)}` };
      const refused: [string, number][] = [
        ['/v1/runs', 401],
        ['/admin/queues/', 401],
        ['/console/runs', 303],
      ];
      for (const [path, status] of refused) {
        const res = await fetch(`${h.url}${path}`, { redirect: 'manual', headers: forged });
        expect(res.status, path).toBe(status);
        if (status === 303) expect(res.headers.get('location'), path).toContain('/console/login');
        await res.body?.cancel();
      }
      const login = await fetch(`${h.url}/console/login`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/json', cookie: `console_login_csrf=${'c'.repeat(32)}` },
        body: JSON.stringify({ token: OPERATOR_TOKEN, csrf: 'é'.repeat(32) }),
      });
      expect(login.status).toBe(403);
      expect(login.headers.get('set-cookie') ?? '').not.toContain('console_session=');
      expect(errors).not.toHaveBeenCalled();
    } finally {
      errors.mockRestore();
    }
  });

  it('a lone surrogate anywhere in a body is a 400 naming the field, on the API and both webhooks; nothing is written', async () => {
    const before = await keys();
    const create = await fetch(`${h.url}/v1/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${PRODUCER_TOKEN}` },
      body: JSON.stringify({ tenant: 'acme', ticket: sampleTicket('LS-\ud800') }),
    });
    expect(create.status).toBe(400);
    expect(await create.json()).toMatchObject({ fields: [{ path: 'ticket.id' }] });
    const ticketEvent = JSON.stringify({ v: 1, eventId: 'ev-ls', ticket: sampleTicket('LS-\udc00') });
    const hook = await fetch(`${h.url}/webhooks/tickets/acme`, {
      method: 'POST',
      headers: signed(ticketEvent),
      body: ticketEvent,
    });
    expect(hook.status).toBe(400);
    expect(await hook.json()).toMatchObject({ fields: [{ path: 'ticket.id' }] });
    const zendesk = JSON.stringify({
      ticket: { id: 'Z-\ud800', subject: 'S', description: 'D', requester: { email: 'ada@example.com', name: 'Ada' } },
    });
    const zres = await fetch(`${h.url}/webhooks/zendesk/acme`, {
      method: 'POST',
      headers: signed(zendesk),
      body: zendesk,
    });
    expect(zres.status).toBe(400);
    expect(await zres.json()).toMatchObject({ fields: [{ path: 'ticket.id' }] });
    expect(await written(before)).toEqual([]);
  });

  it('a malformed %-escape in a path parameter is a plain 4xx with no error logged', async () => {
    const errors = vi.spyOn(h.ctx.log, 'error');
    for (const [method, path] of [
      ['GET', '/v1/runs/%E0%A4%A'],
      ['POST', '/v1/runs/%E0%A4%A/cancel'],
      ['GET', '/console/runs/%ZZ'],
    ]) {
      const res = await fetch(`${h.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${OPERATOR_TOKEN}`, 'content-type': 'application/json' },
        ...(method === 'POST' ? { body: '{}' } : {}),
      });
      expect(res.status, path).toBeGreaterThanOrEqual(400);
      expect(res.status, path).toBeLessThan(500);
      expect(await res.text(), path).not.toContain('internal_error');
    }
    expect(errors).not.toHaveBeenCalled();
    errors.mockRestore();
  });
});

describe('writes of a 4xx', () => {
  it('deleting a schedule that does not exist is a 404 that writes nothing (found by the fuzzer)', async () => {
    // No worker: nothing else writes while the request runs.
    const bare = await createHarness('inputsBare', { OPERATOR_TOKEN });
    try {
      const { url } = await bare.startApi();
      const prefixed = async () => new Set(await bare.ctx.redis.keys(`${bare.cfg.KEY_PREFIX}*`));
      const before = await prefixed();
      const res = await fetch(`${url}/v1/schedules/acme/no-such-schedule`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${OPERATOR_TOKEN}` },
      });
      expect(res.status).toBe(404);
      // The schedules queue, made on its first use, wrote its BullMQ meta hash here.
      expect([...(await prefixed())].filter((k) => !before.has(k))).toEqual([]);
    } finally {
      await bare.close();
    }
  });
});
