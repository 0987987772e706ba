/**
 * Following a ticket in the console, in headless Chromium (Debian's /usr/bin/chromium, playwright-core), against
 * real Redis, a real worker and the sandbox: the search box finds a ticket's runs by subject, customer and an agent
 * field, and the list shows each run's ticket and search fields; the run page shows the ticket's whole chain of runs
 * with its previous and next run, the run tree (children under their parent, the parent from a child), a time on
 * each conversation entry, and the run's timeline as an SVG of model calls, tools and commits; the human queue shows
 * each item's ticket. Screenshots go to a temp dir (printed), never into the checkout.
 *
 *   npx vitest run test/integration/operators/consoleTicket.test.ts
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { buildSpec } from '../../../src/producer/intake.js';
import type { Harness } from '../../../testkit/harness.js';
import { email, final, operatorHarness, turn } from './support.js';

const CHROMIUM = '/usr/bin/chromium';
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium) console.warn(`consoleTicket.test.ts skipped: ${CHROMIUM} is absent`);

const sha = (t: string) => createHash('sha256').update(t).digest('hex');
const ADA = 'ada-ticket-token-0123';
const SHOTS = join(tmpdir(), 'agent-console-ticket-shots');
const TAG = Date.now();
const TICKET = `TCK-${TAG}`;
const CUSTOMER = `grace-${TAG}@example.com`;

describe.skipIf(!haveChromium)('following a ticket in the console', () => {
  let h: Harness & { url: string };
  let browser: Browser;
  let page: Page;
  const chain: string[] = [];
  let child: string;
  let grandchild: string;
  let humanRun: string;

  async function start(id: string, customer: string, script: unknown[], event?: string): Promise<string> {
    const ticket = {
      id,
      subject: 'Broken teapot',
      body: 'The spout snapped.',
      customer: { email: customer, name: 'Grace' },
    };
    const spec = buildSpec(
      h.ctx,
      { tenant: 'acme', ticket, agent: { model: 'scripted', script: script as never } },
      Date.now(),
      event,
    );
    await h.ctx.store.create(spec, Date.now());
    return spec.runId;
  }

  async function startChild(parent: string, id: string): Promise<string> {
    const started = await h.ctx.childRuns!.start({
      parent: { runId: parent, step: 1, callId: 'call_1_0', tenant: 'acme', deadlineAt: Date.now() + 60_000 },
      agent: 'support',
      input: { id, subject: 'Sub-task', body: 'Check the stock.', customer: { email: CUSTOMER, name: 'Grace' } },
      limits: { maxSteps: 3, maxTokens: 5000, deadlineAt: Date.now() + 30_000 },
      now: Date.now(),
    });
    expect(started).toMatchObject({ kind: 'started' });
    return (started as { runId: string }).runId;
  }

  beforeAll(async () => {
    h = await operatorHarness('console-ticket', {
      OPERATORS: JSON.stringify([{ name: 'ada', tokenSha256: sha(ADA), role: 'operator', tenants: '*' }]),
      RECONCILE_DEADLINE_MS: '200',
      RECONCILE_POLL_MS: '20',
      FOLLOW_UP_WAIT_MS: '50',
    });
    for (const event of ['e1', 'e2', 'e3']) {
      const runId = await start(TICKET, CUSTOMER, [turn([email]), final], `${TICKET}-${event}`);
      expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('completed');
      chain.push(runId);
    }
    child = await startChild(chain[1]!, `${TICKET}-child`);
    grandchild = await startChild(child, `${TICKET}-grandchild`);
    h.sandbox.setFaults([
      { kind: 'lost_response_after_commit', resource: 'emails', count: 1 },
      { kind: 'no_lookup', resource: 'emails' },
    ]);
    humanRun = await start(`HUM-${TAG}`, `bob-${TAG}@example.com`, [turn([email]), final]);
    expect(await h.waitForStatus(humanRun, ['needs_human', 'completed', 'failed'])).toBe('needs_human');
    h.sandbox.setFaults([]);

    const { chromium } = await import('playwright-core');
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
    });
    mkdirSync(SHOTS, { recursive: true });
    console.log(`consoleTicket screenshots: ${SHOTS}`);
    const context = await browser.newContext({ viewport: { width: 1300, height: 900 } });
    page = await context.newPage();
    await page.goto(`${h.url}/console`);
    await page.fill('input[name=token]', ADA);
    await Promise.all([page.waitForURL(`${h.url}/console/runs`), page.click('#login')]);
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  const rowIds = async () =>
    page.locator('#runs tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-run')));

  it("the search box finds a ticket's runs by subject, customer and an agent field; rows show ticket and fields", async () => {
    await page.fill('#search-subject', TICKET);
    await Promise.all([page.waitForURL(/subject=/), page.click('#search')]);
    expect(await rowIds()).toEqual([...chain].reverse());
    expect(await page.locator('#runs tbody tr td.subject').first().textContent()).toBe(TICKET);
    const fields = page.locator(`#runs tbody tr[data-run="${chain[0]}"] .search-field`);
    expect(await fields.allTextContents()).toEqual([`customer: ${CUSTOMER}`, `ticket: ${TICKET}`]);
    await page.screenshot({ path: join(SHOTS, 'search-subject.png'), fullPage: true });

    await page.goto(`${h.url}/console/runs`);
    await page.fill('#search-customer', CUSTOMER);
    await Promise.all([page.waitForURL(/customer=/), page.click('#search')]);
    expect((await rowIds()).sort()).toEqual([...chain, child, grandchild].sort());

    await page.goto(`${h.url}/console/runs`);
    await page.fill('#search-field', `ticket=${TICKET}-child`);
    await Promise.all([page.waitForURL(/field=/), page.click('#search')]);
    expect(await rowIds()).toEqual([child]);
  });

  it("the run page shows the ticket's chain, the run tree, a time on each entry and the timeline", async () => {
    await page.goto(`${h.url}/console/runs/${chain[1]}`);
    expect(await page.locator('#run-subject').textContent()).toBe(TICKET);
    const rows = page.locator('#chain tbody tr');
    expect(await rows.evaluateAll((rs) => rs.map((r) => r.getAttribute('data-run')))).toEqual(chain);
    expect(await page.locator('#chain tr.current').getAttribute('data-run')).toBe(chain[1]);
    expect(await page.locator('#previous-run').getAttribute('href')).toBe(`/console/runs/${chain[0]}`);
    expect(await page.locator('#next-run').getAttribute('href')).toBe(`/console/runs/${chain[2]}`);
    // The tree: the child under this run, the grandchild under the child.
    await page.locator(`#run-tree li[data-run="${child}"] li[data-run="${grandchild}"]`).waitFor();
    // Every conversation entry carries the time it was written.
    const entries = await page.locator('#conversation > li').count();
    expect(entries).toBeGreaterThan(2);
    expect(await page.locator('#conversation > li time.at').count()).toBe(entries);
    // The timeline: each step's model call and commit, the email tool, as bars on one axis.
    const svg = page.locator('#timeline-svg');
    expect(await svg.locator('g.bar.model').count()).toBe(2);
    expect(await svg.locator('g.bar.commit').count()).toBe(2);
    expect(await svg.locator('g.bar.tool').count()).toBe(1);
    expect(await svg.locator('g.bar.tool title').textContent()).toContain('send_email');
    await page.screenshot({ path: join(SHOTS, 'run-ticket.png'), fullPage: true });

    await page.goto(`${h.url}/console/runs/${grandchild}`);
    expect(await page.locator('#tree-parent > a').first().getAttribute('href')).toBe(`/console/runs/${child}`);
    await page.screenshot({ path: join(SHOTS, 'run-child.png'), fullPage: true });
  });

  it('the human queue shows which ticket each item belongs to', async () => {
    await page.goto(`${h.url}/console/runs?status=needs_human`);
    const row = page.locator(`#runs tbody tr[data-run="${humanRun}"]`);
    expect(await row.locator('td.subject').textContent()).toBe(`HUM-${TAG}`);
    await page.screenshot({ path: join(SHOTS, 'human-queue.png'), fullPage: true });
    await page.goto(`${h.url}/console/runs/${humanRun}`);
    expect(await page.locator('.human-subject code').textContent()).toBe(`HUM-${TAG}`);
  });
});
