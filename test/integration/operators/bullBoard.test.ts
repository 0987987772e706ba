/** Bull Board behind basic auth or the operator token. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { email, final, OPERATOR_TOKEN, operatorHarness, turn } from './support.js';
import { buildSpec } from '../../../src/producer/intake.js';
import { sampleTicket, type Harness } from '../../../testkit/harness.js';

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
    expect((await fetch(`${h.url}/admin/queues`, { headers: { authorization: basic('admin', 'wrong') } })).status).toBe(
      401,
    );
    expect(
      (await fetch(`${h.url}/admin/queues/api/queues`, { headers: { authorization: 'Bearer wrong' } })).status,
    ).toBe(401);
  });

  it('serves the board with basic auth or the operator token, listing every shard queue', async () => {
    const page = await fetch(`${h.url}/admin/queues`, { headers: { authorization: basic('admin', 'board-password') } });
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/<html/i);
    const api = await fetch(`${h.url}/admin/queues/api/queues`, {
      headers: { authorization: `Bearer ${OPERATOR_TOKEN}` },
    });
    expect(api.status).toBe(200);
    const body = (await api.json()) as { queues: { name: string; readOnlyMode: boolean }[] };
    expect(body.queues.map((q) => q.name)).toEqual(h.ctx.queues.all().map((q) => q.name));
    expect(body.queues.every((q) => q.readOnlyMode)).toBe(true);
  });

  it('each job carries references only and links to its run page, which the board credentials open', async () => {
    // An ended run's last commit drops its step jobs: the board shows the jobs of runs at work. This run waits for an
    // admission that never comes (its step 1 job delayed), as a run in its tenant's line does.
    const spec = buildSpec(
      h.ctx,
      { tenant: 'acme', ticket: sampleTicket('BOARD'), agent: { model: 'scripted', script: [turn([email]), final] } },
      Date.now(),
    );
    await h.ctx.store.intake(spec, Date.now(), true);
    const runId = spec.runId;
    const queue = h.ctx.queues.forRun(runId).name;
    const auth = { authorization: basic('admin', 'board-password') };
    const res = await fetch(
      `${h.url}/admin/queues/api/queues?activeQueue=${encodeURIComponent(queue)}&status=delayed&page=1&jobsPerPage=50`,
      { headers: auth },
    );
    expect(res.status).toBe(200);
    const text = await res.text();
    const body = JSON.parse(text) as {
      queues: {
        name: string;
        jobs: { id: string; data: unknown; externalUrl?: { href: string; displayText?: string } }[];
      }[];
    };
    const jobs = body.queues.find((q) => q.name === queue)!.jobs.filter((j) => j.id.startsWith(`${runId}.`));
    expect(jobs.map((j) => j.id).sort()).toEqual([`${runId}.s1`]);
    for (const j of jobs) {
      expect(j.externalUrl?.href).toBe(`/runs/${runId}`);
      expect(Object.keys(j.data as object).sort()).toEqual(['runId', 'step', 'used', 'v']);
    }
    for (const customerText of ['ada@example.com', 'broken', 'We are on it']) expect(text).not.toContain(customerText);

    const page = await fetch(`${h.url}/runs/${runId}`, { headers: auth });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(await page.text()).toContain('<td id="status">queued</td>');
    const denied = await fetch(`${h.url}/runs/${runId}`);
    expect(denied.status).toBe(401);
    expect(denied.headers.get('www-authenticate')).toMatch(/^Basic realm="bull-board"/);
  });
});
