/**
 * Bull Board and the run page in a real browser: headless Chromium from
 * Debian's packages (/usr/bin/chromium; scripts/ci-deps.sh installs it),
 * driven by playwright-core. Skipped, saying so, where Chromium is absent.
 *
 *   npx vitest run test/integration/operators/browser.test.ts
 */
import { existsSync } from 'node:fs';
import { mkdtemp, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext } from 'playwright-core';
import { buildSpec } from '../../../src/producer/intake.js';
import type { Harness } from '../../../testkit/harness.js';
import { final, operatorHarness, turn } from './support.js';

const CHROMIUM = '/usr/bin/chromium';
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium)
  console.warn(
    `browser.test.ts skipped: ${CHROMIUM} is absent (Debian package chromium; scripts/ci-deps.sh installs it)`,
  );

const USER = 'board-admin';
const PASSWORD = 'board-password-for-tests';
// Customer text that must never appear on the board, and markup that must arrive as text on the run page.
const TICKET = {
  id: `BROWSER-${Date.now()}`,
  subject: 'Parcel arrived crushed',
  body: 'The teapot spout snapped off in transit.',
  customer: { email: 'grace@example.com', name: 'Grace' },
};
const HOSTILE = '<img src=x id=injected onerror="document.title=1">';
const emailCall = {
  name: 'send_email',
  args: { to: 'grace@example.com', template: 'ack', subject: 'Re: your parcel', body: `We are on it. ${HOSTILE}` },
};

describe.skipIf(!haveChromium)('operators in a real browser (headless Chromium)', () => {
  let h: Harness & { url: string };
  let browser: Browser;
  let context: BrowserContext;
  let runId: string;
  let shots: string;

  beforeAll(async () => {
    h = await operatorHarness('browser', { BULL_BOARD_USER: USER, BULL_BOARD_PASSWORD: PASSWORD });
    const spec = buildSpec(
      h.ctx,
      { tenant: 'acme', ticket: TICKET, agent: { model: 'scripted', script: [turn([emailCall]), final] } },
      Date.now(),
    );
    await h.ctx.store.create(spec, Date.now());
    runId = spec.runId;
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('completed');

    const { chromium } = await import('playwright-core');
    // launch() gives every browser a fresh temporary user-data-dir, removed on close.
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
    context = await browser.newContext({
      httpCredentials: { username: USER, password: PASSWORD },
      viewport: { width: 1400, height: 1000 },
    });
    shots = await mkdtemp(join(tmpdir(), 'operators-browser-'));
  });
  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  /**
   * Without (right) credentials the browser is refused: the navigation ends on
   * the 401 challenge (headless Chromium cannot prompt; depending on timing it
   * shows the 401 or fails the navigation with ERR_INVALID_AUTH_CREDENTIALS).
   */
  async function refused(path: string, credentials?: { username: string; password: string }): Promise<void> {
    const other = await browser.newContext(credentials ? { httpCredentials: credentials } : {});
    const page = await other.newPage();
    const outcome = await page.goto(`${h.url}${path}`).then(
      (r) => String(r?.status()),
      (err: Error) => err.message,
    );
    expect(outcome).toMatch(/^401$|ERR_INVALID_AUTH_CREDENTIALS/);
    expect(await page.locator('#status, #transcript, a[href^="/runs/"]').count()).toBe(0);
    const res = await other.request.get(`${h.url}${path}`);
    expect(res.status()).toBe(401);
    expect(res.headers()['www-authenticate']).toMatch(/^Basic realm="bull-board"/);
    await other.close();
  }

  it('Bull Board asks for credentials without them, and refuses wrong ones', async () => {
    await refused('/admin/queues');
    await refused('/admin/queues', { username: USER, password: 'wrong' });
  });

  it("Bull Board shows the step queue and the run's jobs as references only, each linking to the run page, which shows the run", async () => {
    const page = await context.newPage();
    const queue = h.ctx.queues.all()[0]!.name;
    const res = await page.goto(`${h.url}/admin/queues`);
    expect(res?.status()).toBe(200);
    await page.getByText(queue).first().waitFor({ timeout: 15_000 });
    await page.screenshot({ path: join(shots, 'board-overview.png'), fullPage: true });

    // An ended run's step jobs are dropped by its last commit: the board shows the jobs of runs at work. This one
    // waits for an admission that never comes (its step 1 job delayed), as a run in its tenant's line does.
    const atWork = buildSpec(
      h.ctx,
      {
        tenant: 'acme',
        ticket: { ...TICKET, id: `${TICKET.id}-board` },
        agent: { model: 'scripted', script: [final] },
      },
      Date.now(),
    );
    await h.ctx.store.intake(atWork, Date.now(), true);
    await page.goto(`${h.url}/admin/queues/queue/${encodeURIComponent(queue)}?status=delayed`);
    const link = page.locator(`a[href="/runs/${atWork.runId}"]`).first();
    await link.waitFor({ timeout: 15_000 });
    expect(await link.textContent()).toContain(`run view: ${atWork.runId} step`);
    const board = await page.locator('body').innerText();
    expect(board).toContain(atWork.runId);
    expect(board).toMatch(/step"?:\s*1\b/);
    for (const secret of [TICKET.subject, TICKET.body, TICKET.customer.email, 'We are on it'])
      expect(board).not.toContain(secret);
    await page.screenshot({ path: join(shots, 'board-jobs.png'), fullPage: true });

    // Follow the link (it opens a new tab) with the credentials the board was given.
    const [runPage] = await Promise.all([context.waitForEvent('page'), link.click()]);
    await runPage.waitForLoadState();
    expect(runPage.url()).toBe(`${h.url}/runs/${atWork.runId}`);
    expect(await runPage.locator('#run-id').textContent()).toBe(atWork.runId);
    expect(await runPage.locator('#status').textContent()).toBe('queued');
    // The ended run's page, with the same credentials: its transcript, budget and effects.
    await runPage.goto(`${h.url}/runs/${runId}`);
    expect(await runPage.locator('#run-id').textContent()).toBe(runId);
    expect(await runPage.locator('#status').textContent()).toBe('completed');
    const budget = await runPage.locator('#budget').innerText();
    expect(budget).toMatch(/used\s+2\s+30/); // 2 steps, 2 x (10 + 5) tokens
    const transcript = await runPage.locator('#transcript').innerText();
    expect(transcript).toContain('send_email');
    expect(transcript).toContain('done');
    // Markup in the transcript is text, never elements.
    expect(transcript).toContain('<img src=x id=injected');
    expect(await runPage.locator('#injected').count()).toBe(0);
    expect(await runPage.title()).toBe(`run ${runId}`);

    const effect = runPage.locator('#effects section.effect').first();
    expect(await effect.locator('.state').textContent()).toBe('confirmed');
    const history = await effect.locator('table.history tbody tr td:nth-child(3)').allTextContents();
    expect(history).toEqual(['planned', 'authorized', 'dispatched', 'confirmed']);
    expect(await effect.innerText()).toMatch(/receipt [0-9a-f]{8}-[0-9a-f]{4}-/);
    await runPage.screenshot({ path: join(shots, 'run-page.png'), fullPage: true });

    for (const name of ['board-overview.png', 'board-jobs.png', 'run-page.png'])
      expect((await stat(join(shots, name))).size).toBeGreaterThan(1000);
    console.info(`browser screenshots in ${shots}`);
  });

  it('the run page needs credentials too', async () => {
    await refused(`/runs/${runId}`);
    await refused(`/runs/${runId}`, { username: USER, password: 'wrong' });
  });
});
