/** Bull Board behind basic auth or the operator token. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Harness } from '../support/harness.js';
import { OPERATOR_TOKEN, operatorHarness } from './support.js';

let h: Harness & { url: string };
beforeAll(async () => {
  h = await operatorHarness('board', { BULL_BOARD_USER: 'admin', BULL_BOARD_PASSWORD: 'board-password' });
});
afterAll(async () => {
  await h.close();
});

const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

describe('bull board', () => {
  it('is 401 without credentials or with wrong ones', async () => {
    const none = await fetch(`${h.url}/admin/queues`);
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Basic/);
    expect((await fetch(`${h.url}/admin/queues`, { headers: { authorization: basic('admin', 'wrong') } })).status).toBe(401);
    expect((await fetch(`${h.url}/admin/queues/api/queues`, { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
  });

  it('serves the board with basic auth or the operator token, listing every shard queue', async () => {
    const page = await fetch(`${h.url}/admin/queues`, { headers: { authorization: basic('admin', 'board-password') } });
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/<html/i);
    const api = await fetch(`${h.url}/admin/queues/api/queues`, { headers: { authorization: `Bearer ${OPERATOR_TOKEN}` } });
    expect(api.status).toBe(200);
    const body = (await api.json()) as { queues: { name: string; readOnlyMode: boolean }[] };
    expect(body.queues.map((q) => q.name)).toEqual(h.ctx.queues.all().map((q) => q.name));
    expect(body.queues.every((q) => q.readOnlyMode)).toBe(true);
  });
});
