/**
 * The console's retry button, time-range filter and job links, over real HTTP with a
 * real console session (login form, session cookie, CSRF token), as a browser sends
 * them: an operator retries a stopped run with an extension and sees it finish; a
 * viewer gets no button and a forged or token-less form is refused; the runs list
 * filters on the time of the last status change (console and API).
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSpec } from '../../../src/producer/intake.js';
import { type Harness, sampleTicket } from '../../../testkit/harness.js';
import { call, email, final, operatorHarness, turn } from './support.js';

const sha = (t: string) => createHash('sha256').update(t).digest('hex');
const ADA = 'ada-retry-token-0123';
const VIC = 'vic-retry-token-0123';

let h: Harness & { url: string };
beforeAll(async () => {
  h = await operatorHarness('console-retry', {
    OPERATORS: JSON.stringify([
      { name: 'ada', tokenSha256: sha(ADA), role: 'operator', tenants: '*' },
      { name: 'vic', tokenSha256: sha(VIC), role: 'viewer', tenants: '*' },
    ]),
  });
});
afterAll(async () => {
  await h.close();
});

let seq = 0;
async function stoppedRun(): Promise<string> {
  const spec = buildSpec(
    h.ctx,
    {
      tenant: 'acme',
      ticket: sampleTicket(`CRT-${++seq}-${Date.now()}`),
      agent: { model: 'scripted', script: [turn([email]), final] },
      budget: { maxSteps: 1 },
    },
    Date.now(),
  );
  await h.ctx.store.create(spec, Date.now());
  expect(await h.waitForStatus(spec.runId, ['budget_exceeded', 'completed'])).toBe('budget_exceeded');
  return spec.runId;
}

const cookieOf = (res: Response, name: string) =>
  res.headers
    .getSetCookie()
    .map((c) => c.split(';')[0]!)
    .find((c) => c.startsWith(`${name}=`))!;
const csrfOf = (html: string) => /name="csrf" value="([^"]+)"/.exec(html)?.[1];

/** Logs in through the console's form; returns the session cookie. */
async function login(token: string): Promise<string> {
  const page = await fetch(`${h.url}/console/login`);
  const loginCookie = cookieOf(page, 'console_login_csrf');
  const csrf = csrfOf(await page.text())!;
  const res = await fetch(`${h.url}/console/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: loginCookie },
    body: new URLSearchParams({ token, csrf }).toString(),
  });
  expect(res.status).toBe(303);
  return cookieOf(res, 'console_session');
}

const get = async (session: string, path: string) => {
  const res = await fetch(`${h.url}${path}`, { headers: { cookie: session }, redirect: 'manual' });
  return { status: res.status, html: await res.text() };
};
const post = (session: string, path: string, form: Record<string, string>) =>
  fetch(`${h.url}${path}`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: session },
    body: new URLSearchParams(form).toString(),
  });

describe('console: retry, time range, jobs', () => {
  it('an operator retries a stopped run from its page with an extension and the run finishes; the page shows who retried', async () => {
    const runId = await stoppedRun();
    const ada = await login(ADA);
    const page = await get(ada, `/console/runs/${runId}`);
    expect(page.status).toBe(200);
    expect(page.html).toContain('id="retry-form"');
    // The run's jobs, linked to Bull Board.
    expect(page.html).toContain(`data-job="${runId}.s1"`);
    const csrf = csrfOf(page.html)!;

    // Without the session's CSRF token the form is refused and nothing changes.
    expect((await post(ada, `/console/runs/${runId}/retry`, { steps: '2' })).status).toBe(403);
    expect((await post(ada, `/console/runs/${runId}/retry`, { steps: 'lots', csrf })).status).toBe(400);
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')).toBe('budget_exceeded');
    // No extension of the budget that stopped it: refused, naming why.
    const bare = await post(ada, `/console/runs/${runId}/retry`, { steps: '', csrf });
    expect(bare.status).toBe(409);
    expect(await bare.text()).toContain('extension_required');

    const res = await post(ada, `/console/runs/${runId}/retry`, { steps: '2', tokens: '', wallMs: '', csrf });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe(`/console/runs/${runId}?done=retried`);
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'budget_exceeded'])).toBe('completed');
    expect(h.sandbox.counts().byResource.emails.records).toBeGreaterThanOrEqual(1);
    const entry = (await h.ctx.store.transcript(runId)).find((e) => e.kind === 'operator');
    expect(entry).toMatchObject({
      action: 'retry',
      by: 'ada',
      detail: 'from=budget_exceeded,steps=+2,tokens=+0,wall_ms=+0',
    });
    const after = await get(ada, `/console/runs/${runId}`);
    expect(after.html).not.toContain('id="retry-form"');
    expect(after.html).toContain('operator ada</span> retry');
  });

  it('a viewer sees no retry button, and its forged form is refused', async () => {
    const runId = await stoppedRun();
    const vic = await login(VIC);
    const page = await get(vic, `/console/runs/${runId}`);
    expect(page.status).toBe(200);
    expect(page.html).not.toContain('id="retry-form"');
    const res = await post(vic, `/console/runs/${runId}/retry`, { steps: '2', csrf: csrfOf(page.html)! });
    expect(res.status).toBe(403);
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')).toBe('budget_exceeded');
  });

  it('the runs list filters on the time of the last status change, in the console and the API', async () => {
    const before = Date.now() - 1;
    const runId = await stoppedRun();
    const statusAt = Number(
      await h.ctx.redis.zscore(h.ctx.keys.runsByStatus(h.ctx.keys.shardOf(runId), 'budget_exceeded'), runId),
    );
    const ada = await login(ADA);
    const iso = (ms: number) => new Date(ms).toISOString().slice(0, 19);

    const inRange = await get(
      ada,
      `/console/runs?status=budget_exceeded&since=${iso(before - 1000)}&until=${iso(statusAt + 2000)}`,
    );
    expect(inRange.html).toContain(`data-run="${runId}"`);
    expect(inRange.html).toContain(`value="${iso(before - 1000)}"`);
    const later = await get(ada, `/console/runs?status=budget_exceeded&since=${iso(statusAt + 2000)}`);
    expect(later.html).not.toContain(`data-run="${runId}"`);
    const earlier = await get(ada, `/console/runs?status=budget_exceeded&until=${iso(before - 60_000)}`);
    expect(earlier.html).not.toContain(`data-run="${runId}"`);
    expect((await get(ada, '/console/runs?since=yesterday')).status).toBe(400);

    type Page = { runs: { runId: string }[] };
    const api = async (q: string) => call<Page>(h.url, 'GET', `/v1/runs?${q}`);
    expect((await api(`since=${statusAt}&until=${statusAt + 1}`)).body.runs.map((r) => r.runId)).toContain(runId);
    expect((await api(`until=${statusAt}`)).body.runs.map((r) => r.runId)).not.toContain(runId);
    expect((await api(`since=${statusAt + 1}`)).body.runs.map((r) => r.runId)).not.toContain(runId);
    const bad = await call<{ fields: { path: string }[] }>(h.url, 'GET', '/v1/runs?until=noon');
    expect(bad.status).toBe(400);
    expect(bad.body.fields.map((f) => f.path)).toContain('until');
  });
});
