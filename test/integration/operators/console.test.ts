/**
 * The operator console in headless Chromium (Debian's /usr/bin/chromium,
 * playwright-core), against real Redis, real workers, the real sandbox over
 * HTTP: log in, find a run by status, open it, approve an action and see the
 * run continue, resolve a human-queue item and see the run finish; a viewer
 * gets no buttons (and a forged form is refused), another tenant's operator
 * gets 404; a form without the CSRF token is refused; the page runs under a
 * strict CSP with customer markup shown as text. With CONSOLE_SCREENSHOTS=1 the
 * screenshots are written to docs/console/*.png (shown in the README); otherwise to a
 * temp dir, so a test run leaves the checkout as it was.
 *
 *   npx vitest run test/integration/operators/console.test.ts
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { buildSpec } from '../../../src/producer/intake.js';
import { Ledger } from '../../../src/ledger/ledger.js';
import type { Harness } from '../../../testkit/harness.js';
import { email, final, operatorHarness, refund, turn } from './support.js';

const CHROMIUM = '/usr/bin/chromium';
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium)
  console.warn(
    `console.test.ts skipped: ${CHROMIUM} is absent (Debian package chromium; scripts/ci-deps.sh installs it)`,
  );

const sha = (t: string) => createHash('sha256').update(t).digest('hex');
const ADA = 'ada-console-token-0123';
const VIC = 'vic-console-token-0123';
const TOM = 'tom-console-token-0123';
const SHOTS =
  process.env.CONSOLE_SCREENSHOTS === '1'
    ? join(process.cwd(), 'docs', 'console')
    : join(tmpdir(), 'agent-console-shots');
const HOSTILE = '<img src=x id=injected onerror="document.title=1">';

describe.skipIf(!haveChromium)('the operator console in a real browser', () => {
  let h: Harness & { url: string };
  let ledger: Ledger;
  let browser: Browser;
  let approvalRun: string;
  let humanRun: string;

  async function start(ticketId: string, subject: string, script: unknown[]): Promise<string> {
    const ticket = {
      id: ticketId,
      subject,
      body: `Hello, ${HOSTILE} my order arrived broken.`,
      customer: { email: 'grace@example.com', name: 'Grace' },
    };
    const spec = buildSpec(
      h.ctx,
      { tenant: 'acme', ticket, agent: { model: 'scripted', script: script as never } },
      Date.now(),
    );
    await h.ctx.store.create(spec, Date.now());
    return spec.runId;
  }

  async function loggedIn(token: string): Promise<{ context: BrowserContext; page: Page }> {
    const context = await browser.newContext({ viewport: { width: 1300, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${h.url}/console`);
    expect(page.url()).toBe(`${h.url}/console/login`);
    await page.fill('input[name=token]', token);
    await Promise.all([page.waitForURL(`${h.url}/console/runs`), page.click('#login')]);
    return { context, page };
  }

  beforeAll(async () => {
    h = await operatorHarness('console', {
      OPERATORS: JSON.stringify([
        { name: 'ada', tokenSha256: sha(ADA), role: 'operator', tenants: '*' },
        { name: 'vic', tokenSha256: sha(VIC), role: 'viewer', tenants: '*' },
        { name: 'tom', tokenSha256: sha(TOM), role: 'operator', tenants: ['globex'] },
      ]),
      RECONCILE_DEADLINE_MS: '200',
      RECONCILE_POLL_MS: '20',
    });
    ledger = new Ledger(h.ctx.redis, h.ctx.keys);
    approvalRun = await start(`CON-A-${Date.now()}`, 'Refund for a broken teapot', [
      turn([refund(20_000)]),
      turn([email]),
      final,
    ]);
    expect(await h.waitForStatus(approvalRun, ['waiting_approval'])).toBe('waiting_approval');
    h.sandbox.setFaults([
      { kind: 'lost_response_after_commit', resource: 'emails', count: 1 },
      { kind: 'no_lookup', resource: 'emails' },
    ]);
    humanRun = await start(`CON-H-${Date.now()}`, 'Where is my parcel', [turn([email]), final]);
    expect(await h.waitForStatus(humanRun, ['needs_human', 'completed', 'failed'])).toBe('needs_human');
    h.sandbox.setFaults([]);

    const { chromium } = await import('playwright-core');
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    mkdirSync(SHOTS, { recursive: true });
  });
  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  it('an operator finds a run by status, opens it, approves the exact content and sees the run continue', async () => {
    const { context, page } = await loggedIn(ADA);
    const cspViolations: string[] = [];
    page.on('console', (m) => {
      if (/Content Security Policy/i.test(m.text())) cspViolations.push(m.text());
    });
    expect(await page.locator('#operator').textContent()).toBe('ada');
    await page.selectOption('#filter-status', 'waiting_approval');
    await Promise.all([page.waitForURL(/status=waiting_approval/), page.click('#filter')]);
    const rows = page.locator('#runs tbody tr');
    expect(await rows.count()).toBe(1);
    expect(await rows.first().getAttribute('data-run')).toBe(approvalRun);
    await page.screenshot({ path: join(SHOTS, 'runs.png'), fullPage: true });

    await Promise.all([
      page.waitForURL(`${h.url}/console/runs/${approvalRun}`),
      page.click(`a[href="/console/runs/${approvalRun}"]`),
    ]);
    expect(await page.locator('#status').textContent()).toBe('waiting_approval');
    // The exact fingerprinted arguments, and customer markup only as text.
    const args = JSON.parse((await page.locator('.approval-args').textContent())!) as unknown;
    expect(args).toEqual(refund(20_000).args);
    expect(await page.locator('#input').textContent()).toContain('<img src=x id=injected');
    expect(await page.locator('#injected').count()).toBe(0);
    expect(await page.locator('body').getAttribute('data-live')).toBe('on'); // console.js ran under the CSP
    await page.screenshot({ path: join(SHOTS, 'approval.png'), fullPage: true });

    await Promise.all([page.waitForURL(/done=approved/), page.click('button.approve')]);
    // Live updates (SSE -> htmx) bring the page to the run's end without a reload.
    await page.locator('#status[data-status=completed]').waitFor({ timeout: 20_000 });
    expect(await page.locator('#conversation').innerText()).toMatch(/operator ada\s+approve/);
    expect(await page.locator('.pending').count()).toBe(0);
    await page.screenshot({ path: join(SHOTS, 'run-completed.png'), fullPage: true });
    const [refundAction] = (await ledger.listForRun(approvalRun)).filter((a) => a.tool === 'refund');
    expect(refundAction?.history.find((x) => x.to === 'authorized')?.by).toBe('ada');
    expect(cspViolations).toEqual([]);
    await context.close();
  });

  it('an operator resolves a human-queue item with the evidence in front of them and sees the run finish', async () => {
    const { context, page } = await loggedIn(ADA);
    await page.goto(`${h.url}/console/runs?status=needs_human`);
    await Promise.all([
      page.waitForURL(`${h.url}/console/runs/${humanRun}`),
      page.click(`a[href="/console/runs/${humanRun}"]`),
    ]);
    const item = page.locator('section.pending.human');
    expect(await item.locator('table.history').innerText()).toMatch(/outcome_unknown[\s\S]*needs_human/);
    await page.screenshot({ path: join(SHOTS, 'human-queue.png'), fullPage: true });
    const receipt = 'em_seen_in_provider';
    await item.locator('input[value=confirmed]').check();
    await item.locator('input.receipt').fill(receipt);
    await item.locator('textarea[name=note]').fill('seen in the provider dashboard');
    await Promise.all([page.waitForURL(/done=finding/), item.locator('button.resolve-submit').click()]);
    await page.locator('#status[data-status=completed]').waitFor({ timeout: 20_000 });
    const [mail] = await ledger.listForRun(humanRun);
    const confirmed = mail!.history.find((x) => x.to === 'confirmed');
    expect(confirmed).toMatchObject({ by: 'ada' });
    expect(JSON.stringify(confirmed!.evidence)).toContain('seen in the provider dashboard');
    expect(h.sandbox.counts().byResource.emails.byKey[mail!.idempotencyKey]).toBe(1); // confirmed: never resent
    await context.close();
  });

  it('an operator retries a stopped run with more steps from its page and sees it finish; its jobs are listed', async () => {
    const ticket = {
      id: `CON-R-${Date.now()}`,
      subject: 'Out of steps',
      body: 'Hello',
      customer: { email: 'grace@example.com', name: 'Grace' },
    };
    const spec = buildSpec(
      h.ctx,
      { tenant: 'acme', ticket, agent: { model: 'scripted', script: [turn([email]), final] }, budget: { maxSteps: 1 } },
      Date.now(),
    );
    await h.ctx.store.create(spec, Date.now());
    expect(await h.waitForStatus(spec.runId, ['budget_exceeded', 'completed'])).toBe('budget_exceeded');
    const { context, page } = await loggedIn(ADA);
    // The run's events stream is held until something is typed: its events then arrive while a field is being
    // filled, and a live re-render must not wipe what was typed (the page holds it and says so).
    let typed!: () => void;
    const afterTyping = new Promise<void>((r) => (typed = r));
    await page.route(`**/v1/runs/${spec.runId}/events`, async (route) => {
      await afterTyping;
      await route.continue();
    });
    await page.goto(`${h.url}/console/runs/${spec.runId}`);
    expect(await page.locator('#status').textContent()).toBe('budget_exceeded');
    expect(await page.locator(`#jobs tr[data-job="${spec.runId}.s1"]`).count()).toBe(1);
    await page.screenshot({ path: join(SHOTS, 'retry.png'), fullPage: true });
    await page.locator('#retry-steps').pressSequentially('2');
    expect(await page.locator('#live-held').isHidden()).toBe(true);
    typed();
    await page.locator('body[data-live=held]').waitFor({ timeout: 10_000 });
    expect(await page.locator('#live-held').isVisible()).toBe(true);
    expect(await page.locator('#retry-steps').inputValue()).toBe('2');
    await Promise.all([page.waitForURL(/done=retried/), page.click('#retry')]);
    await page.locator('#status[data-status=completed]').waitFor({ timeout: 20_000 });
    expect(await page.locator('#conversation').innerText()).toMatch(/operator ada\s+retry/);
    expect(await page.locator('#retry-form').count()).toBe(0);
    await context.close();
  });

  it("an ended run's page opens its event stream once, not again every few seconds", async () => {
    const runId = await start(`CON-E-${Date.now()}`, 'Ended', [final]);
    expect(await h.waitForStatus(runId, ['completed', 'failed'])).toBe('completed');
    const { context, page } = await loggedIn(VIC);
    const opened: string[] = [];
    page.on('request', (req) => {
      if (new URL(req.url()).pathname === `/v1/runs/${runId}/events`) opened.push(req.resourceType());
    });
    await page.goto(`${h.url}/console/runs/${runId}`);
    expect(await page.locator('body').getAttribute('data-live')).toBe('on');
    // The stream ends after the run's terminal event. Chromium reopens an ended stream after 3 s unless the stream
    // asked for longer: it asks for ENDED_RETRY_MS (30 s), so another operator's retry still shows on this page.
    await page.waitForTimeout(7_000);
    expect(opened).toEqual(['eventsource']);
    await context.close();
  });

  it('a viewer sees the run without buttons, and a forged form is refused', async () => {
    const runId = await start(`CON-V-${Date.now()}`, 'Viewer check', [turn([refund(30_000)]), final]);
    await h.waitForStatus(runId, ['waiting_approval']);
    const { context, page } = await loggedIn(VIC);
    await page.goto(`${h.url}/console/runs/${runId}`);
    expect(await page.locator('#status').textContent()).toBe('waiting_approval');
    expect(await page.locator('#viewer-note').count()).toBe(1);
    expect(await page.locator('button.approve, button.reject, #cancel').count()).toBe(0);
    await page.screenshot({ path: join(SHOTS, 'viewer.png'), fullPage: true });
    // Even with the session's own CSRF token, the server refuses a viewer's action.
    const csrf = await page.locator('input[name=csrf]').first().getAttribute('value');
    const res = await page.request.post(`${h.url}/console/runs/${runId}/cancel`, {
      form: { csrf: csrf! },
      maxRedirects: 0,
    });
    expect(res.status()).toBe(403);
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')).toBe('waiting_approval');
    await context.close();

    // An operator's form without the CSRF token is refused too.
    const ada = await loggedIn(ADA);
    const forged = await ada.page.request.post(`${h.url}/console/runs/${runId}/cancel`, { form: {}, maxRedirects: 0 });
    expect(forged.status()).toBe(403);
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')).toBe('waiting_approval');
    await ada.context.close();
  });

  it("another tenant's operator is refused the run and does not see it listed", async () => {
    const { context, page } = await loggedIn(TOM);
    const res = await page.goto(`${h.url}/console/runs/${approvalRun}`);
    expect(res?.status()).toBe(404);
    expect(await page.locator('#status').count()).toBe(0);
    await page.goto(`${h.url}/console/runs`);
    expect(await page.locator('#runs tbody tr').count()).toBe(0);
    const events = await page.request.get(`${h.url}/v1/runs/${approvalRun}/events`);
    expect(events.status()).toBe(404);
    await context.close();
  });

  it('without a login the console and the board send the browser to the login page or refuse it; the headers are strict', async () => {
    const context = await browser.newContext();
    const res = await context.request.get(`${h.url}/console/runs/${approvalRun}`, { maxRedirects: 0 });
    expect(res.status()).toBe(303);
    expect(res.headers().location).toBe('/console/login');
    const login = await context.request.get(`${h.url}/console/login`);
    expect(login.headers()['content-security-policy']).toMatch(/script-src 'self'/);
    expect(login.headers()['content-security-policy']).not.toMatch(/unsafe-inline/);
    expect(login.headers()['set-cookie']).toMatch(/HttpOnly; SameSite=Strict/);
    expect((await context.request.get(`${h.url}/admin/queues`)).status()).toBe(401);
    await context.close();

    // One login for both: the session opens Bull Board, whose job links lead back to the run.
    const ada = await loggedIn(ADA);
    expect((await ada.page.request.get(`${h.url}/admin/queues/api/queues`)).status()).toBe(200);
    await ada.page.goto(`${h.url}/console/runs/${approvalRun}`);
    const jobHref = await ada.page.locator('#job-link').getAttribute('href');
    expect(jobHref).toMatch(/^\/admin\/queues\/queue\/steps-/);
    const viaBoard = await ada.page.request.get(`${h.url}/runs/${approvalRun}`, { maxRedirects: 0 });
    expect(viaBoard.status()).toBe(303);
    expect(viaBoard.headers().location).toBe(`/console/runs/${approvalRun}`);
    await ada.context.close();
  });
});
