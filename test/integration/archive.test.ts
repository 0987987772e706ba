/**
 * The archive (ARCHIVE_URL, a real PostgreSQL from PATH): an ended run keeps its keys without a TTL until its archive
 * row is committed, then gets the retention; the archive serves the same view once Redis let the run go; a copy taken
 * twice is one row. Erasure: a customer's text planted in a ticket and its follow-up is gone from every Redis key and
 * every archive column afterwards, ids, statuses, receipts and keys kept; a run at work is refused, naming it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash, randomBytes } from 'node:crypto';
import { createHarness, producerAuth, redisUrl, sampleTicket, type Harness } from '../../testkit/harness.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../testkit/embeddedPostgres.js';
import { until } from '../../testkit/until.js';
import { readSse } from '../../testkit/sse.js';
import { archiverFor } from '../../src/server/archiving.js';
import { Compactor } from '../../src/runs/compactor.js';
import { newMetrics } from '../../src/metrics/metrics.js';
import { registerScrapeCollectors } from '../../src/runs/scrape.js';
import type { Archiver } from '../../src/archive/archiver.js';
import { upsertArchivedRun } from '../../src/archive/db.js';
import { snapshotRun } from '../../src/archive/snapshot.js';
import { runTree } from '../../src/http/console/ticket.js';
import { runView } from '../../src/http/runView.js';
import { ledgerFor } from '../../src/ledger/ledger.js';
import { actorSeesRun } from '../../src/operations/actor.js';
import { ENDED_RETRY_MS } from '../../src/http/operators/events.js';
import { archiveHits as storedArchiveHits, redisHits as storedRedisHits } from '../support/storedHits.js';

const OPERATOR_TOKEN = 'operator-token-for-archive-tests';
const ACME_TOKEN = 'acme-operator-token-0123456789';
const GLOBEX_TOKEN = 'globex-operator-token-0123456789';
const sha = (t: string) => createHash('sha256').update(t).digest('hex');
const operatorAuth = { authorization: `Bearer ${OPERATOR_TOKEN}` };
const RETENTION_MS = 1500;
const DONE = ['completed', 'failed', 'budget_exceeded', 'needs_human', 'cancelled'];
let pg: EmbeddedPostgres;
let h: Harness;
let url: string;
let archiver: Archiver;

beforeAll(async () => {
  pg = await startEmbeddedPostgres();
  h = await createHarness('archive', {
    ARCHIVE_URL: pg.url,
    RUN_RETENTION_MS: String(RETENTION_MS),
    OPERATOR_TOKEN,
    OPERATORS: JSON.stringify([
      { name: 'ann', tokenSha256: sha(ACME_TOKEN), role: 'operator', tenants: ['acme'] },
      { name: 'gus', tokenSha256: sha(GLOBEX_TOKEN), role: 'operator', tenants: ['globex'] },
    ]),
    FOLLOW_UP_WAIT_MS: '50',
  });
  archiver = archiverFor(h.ctx)!;
  url = (await h.startApi()).url;
}, 60_000);
afterAll(async () => {
  await h?.close();
  await pg?.stop();
});

async function postRun(ticket: unknown, eventKey: string): Promise<string> {
  const res = await fetch(`${url}/v1/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...producerAuth, 'idempotency-key': eventKey },
    body: JSON.stringify({ tenant: 'acme', ticket }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { runId: string }).runId;
}

/**
 * A run's events over SSE (the response ends after the run's end), each as `<id> <type> <data>`, and last `retry <ms>`
 * when the stream set the client's reconnection delay.
 */
async function sse(runId: string, lastEventId?: string): Promise<string[]> {
  const res = await fetch(`${url}/v1/runs/${runId}/events`, {
    headers: { ...producerAuth, ...(lastEventId ? { 'last-event-id': lastEventId } : {}) },
  });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const { events, retry } = await readSse(res);
  const lines = events.map((e) => `${e.id} ${e.event} ${e.data}`);
  return retry === undefined ? lines : [...lines, `retry ${retry}`];
}

async function getView(runId: string): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`${url}/v1/runs/${runId}`, { headers: producerAuth });
  return { status: res.status, body: await res.json() };
}

/** An ended run's keys, its journal packed (src/runs/compact.ts): pack it with journalPacked first. */
const runKeysOf = (runId: string) => {
  const k = h.ctx.keys.run(runId);
  return [k.run, k.budget, k.journalPacked, k.events, k.actions];
};
/** The run compacted, as the reconciler's compactor does after its end (src/runs/compactor.ts). */
const journalPacked = async (runId: string) => {
  await new Compactor(h.ctx).drain();
  expect(await h.ctx.redis.exists(h.ctx.keys.run(runId).journalPacked)).toBe(1);
};

/** Every key of the Redis database, read by type (journal entries inflated), that contains `needle`. */
const redisHits = (needle: string) => storedRedisHits(redisUrl(), needle);

/** Every text, json and jsonb column of every table of the archive that contains `needle`. */
const archiveHits = (needle: string) => storedArchiveHits(h.ctx.archive!.pool, needle);

/** An archive row of an acme support run, written as the archiver writes one (upsertArchivedRun), for the tests' own ids. */
function archivedRow(
  runId: string,
  subjectKey: string,
  status: string,
  more: { childRunIds?: string[]; view?: Record<string, unknown> },
) {
  return {
    runId,
    tenant: 'acme',
    agent: 'support',
    subjectKey,
    status,
    reason: 'final_answer',
    createdAtMs: 1,
    endedAtMs: 2,
    erasedAtMs: 0,
    revision: 0,
    childRunIds: more.childRunIds ?? [],
    view: more.view ?? {},
    spec: undefined,
    events: [],
    budget: {},
    record: {},
    searchFields: {},
  };
}

describe('the archive of ended runs', () => {
  it('keeps an ended run in Redis until its archive row is committed, then the archive serves the same view', async () => {
    const worker = await h.startWorker();
    const runId = await postRun(sampleTicket('ARC-1'), 'arc-1');
    expect(await h.waitForStatus(runId, DONE, 20_000)).toBe('completed');
    await journalPacked(runId);
    await worker.stop();

    // Ended, not archived: no TTL on any key, queued for the archive.
    const keys = runKeysOf(runId);
    for (const key of keys) expect(await h.ctx.redis.pttl(key), key).toBe(-1);
    const queue = h.ctx.keys.archiveQueue(h.ctx.keys.shardOf(runId));
    const endedAt = Number(await h.ctx.redis.zscore(queue, runId));
    expect(endedAt).toBeGreaterThan(0);
    const fromRedis = await getView(runId);
    expect(fromRedis.status).toBe(200);
    // Every process exports how long it has waited (read from the queue at scrape time, no archiver needed).
    const lagAt = async (now: number) => {
      const m = newMetrics();
      registerScrapeCollectors(m, { ...h.ctx }, { now: () => now });
      return m.registry.getSingleMetricAsString('agent_archive_lag_seconds');
    };
    expect(await lagAt(endedAt + 42_000)).toMatch(/^agent_archive_lag_seconds 42$/m);

    const report = await archiver.pass();
    expect(report).toMatchObject({ archived: 1, failed: 0 });
    expect(await h.ctx.redis.zscore(queue, runId)).toBeNull();
    expect(await lagAt(endedAt + 42_000)).toMatch(/^agent_archive_lag_seconds 0$/m);
    for (const key of keys) {
      const ttl = await h.ctx.redis.pttl(key);
      expect(ttl, key).toBeGreaterThan(0);
      expect(ttl, key).toBeLessThanOrEqual(RETENTION_MS);
    }
    const row = await h.ctx.archive!.pool.query('SELECT * FROM archived_runs WHERE run_id = $1', [runId]);
    expect(row.rows).toHaveLength(1);
    expect(row.rows[0]).toMatchObject({ status: 'completed', tenant: 'acme', subject_key: 'ARC-1', versions: 1 });
    expect((row.rows[0].view as { effects: unknown[] }).effects.length).toBeGreaterThan(0);
    expect((row.rows[0].events as unknown[]).length).toBeGreaterThan(0);

    // The same copy again (an archiver killed after its commit, before the mark): one row, unchanged.
    const snap = await snapshotRun(h.ctx, runId, (id) => runView(h.ctx, id, (r) => ledgerFor(h.ctx).listForRun(r)));
    expect(await upsertArchivedRun(h.ctx.archive!.pool, snap!.row)).toBe(false);
    expect(await archiver.pass()).toMatchObject({ archived: 0, unchanged: 0, lagSeconds: 0 });

    // Redis lets it go at the retention; the API serves the archived view, the same body.
    await until('the run keys to expire', RETENTION_MS + 10_000, async () => (await h.ctx.redis.exists(...keys)) === 0);
    const fromArchive = await getView(runId);
    expect(fromArchive.status).toBe(200);
    expect(fromArchive.body).toEqual(fromRedis.body);

    // Who sees it is still its tenant's business: an operator of acme reads it, one of globex is told it is unknown,
    // by the API and by the rule the operations and the console ask (the run's tenant read from the archive).
    const asOperator = (token: string) =>
      fetch(`${url}/v1/runs/${runId}`, { headers: { authorization: `Bearer ${token}` } }).then((r) => r.status);
    expect(await asOperator(ACME_TOKEN)).toBe(200);
    expect(await asOperator(GLOBEX_TOKEN)).toBe(404);
    expect(await actorSeesRun(h.ctx, { tenants: ['acme'] }, runId)).toBe(true);
    expect(await actorSeesRun(h.ctx, { tenants: ['globex'] }, runId)).toBe(false);
    // An operation on it by an operator who sees it finds no run at work: 404, nothing written back to Redis.
    const cancel = await fetch(`${url}/v1/runs/${runId}/cancel`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ACME_TOKEN}` },
    });
    expect(cancel.status).toBe(404);
    expect(await h.ctx.redis.exists(...keys)).toBe(0);
  });

  it("erases a customer's text from every Redis key and every archive row, keeping ids, statuses and receipts", async () => {
    const mark = `ERASE-ME-${randomBytes(8).toString('hex')}`;
    const subject = `ER-${randomBytes(4).toString('hex')}`;
    const worker = await h.startWorker();
    const ticket = (body: string) => ({
      ...sampleTicket(subject),
      subject: `Broken ${mark}`,
      body,
      customer: { email: `${mark}@example.com`, name: `Name ${mark}` },
    });
    const first = await postRun(ticket(`first message ${mark}`), 'er-1');
    expect(await h.waitForStatus(first, DONE, 20_000)).toBe('completed');
    const second = await postRun(ticket(`second message ${mark}`), 'er-2');
    expect(await h.waitForStatus(second, DONE, 20_000)).toBe('completed');
    // Their journals packed (src/runs/compact.ts), the text in them.
    for (const runId of [first, second]) {
      await journalPacked(runId);
      expect(await h.ctx.redis.exists(h.ctx.keys.run(runId).journal)).toBe(0);
    }
    await worker.stop();
    // The first run archived, the second ended and waiting for its copy: both stores hold the text.
    await archiver.archiveOne(first, h.ctx.keys.archiveQueue(h.ctx.keys.shardOf(first)));
    expect(await redisHits(mark)).toContain(h.ctx.keys.run(first).journalPacked);
    expect(await redisHits(mark)).not.toEqual([]);
    expect(await archiveHits(mark)).not.toEqual([]);
    const before = (await getView(first)).body as {
      effects: { actionId: string; receipt?: string; idempotencyKey: string }[];
    };

    // A third run of the subject at work (queued, no worker): refused, named, nothing written.
    const third = await postRun(ticket(`third message ${mark}`), 'er-3');
    const refused = await fetch(`${url}/v1/erasures`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...operatorAuth },
      body: JSON.stringify({ tenant: 'acme', subject }),
    });
    expect(refused.status).toBe(409);
    expect(await refused.json()).toMatchObject({ error: 'runs_at_work', runIds: [third] });
    expect(await h.ctx.redis.llen(h.ctx.keys.erasures())).toBe(0);

    const cancel = await fetch(`${url}/v1/runs/${third}/cancel`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...operatorAuth },
      body: '{}',
    });
    expect(cancel.status).toBeLessThan(300);
    // A queued run is cancelled by its next step (no model call after the cancel).
    const again = await h.startWorker();
    expect(await h.waitForStatus(third, ['cancelled'])).toBe('cancelled');
    await again.stop();

    const erased = await fetch(`${url}/v1/erasures`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...operatorAuth },
      body: JSON.stringify({ tenant: 'acme', subject }),
    });
    expect(erased.status).toBe(201);
    const record = (await erased.json()) as { runIds: string[]; requestedBy: string; erasureId: string };
    expect(record.runIds).toEqual([first, second, third].sort());
    expect(record.requestedBy).toBe('operator');
    // The queued runs reach the archive after the erasure: their copies carry the marker, not the text.
    await archiver.pass();

    expect(await redisHits(mark)).toEqual([]);
    expect(await archiveHits(mark)).toEqual([]);
    // What an audit needs is kept: statuses, action ids, receipts, idempotency keys; the erasure's own record.
    const after = (await getView(first)).body as typeof before & { status: string };
    expect(after.status).toBe('completed');
    expect(after.effects.map((e) => [e.actionId, e.receipt, e.idempotencyKey])).toEqual(
      before.effects.map((e) => [e.actionId, e.receipt, e.idempotencyKey]),
    );
    const audit = await h.ctx.archive!.pool.query('SELECT requested_by, run_ids FROM erasures WHERE id = $1', [
      record.erasureId,
    ]);
    expect(audit.rows[0]).toMatchObject({ requested_by: 'operator', run_ids: [first, second, third].sort() });
  });
});

describe('erasure and search by what people know, over Redis and the archive', () => {
  const erase = (body: unknown) =>
    fetch(`${url}/v1/erasures`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...operatorAuth },
      body: JSON.stringify(body),
    });

  it('erases by a search field a run Redis alone holds (ended, not yet archived): no trace in any key', async () => {
    const mark = `FIELD-ME-${randomBytes(8).toString('hex')}`;
    const worker = await h.startWorker();
    // Its subject says nothing of the customer: only the agent's `customer` search field finds it.
    const runId = await postRun(
      {
        ...sampleTicket(`FLD-${randomBytes(4).toString('hex')}`),
        body: `message ${mark}`,
        customer: { email: `${mark}@example.com`, name: `Name ${mark}` },
      },
      `fld-${randomBytes(6).toString('hex')}`,
    );
    expect(await h.waitForStatus(runId, DONE, 20_000)).toBe('completed');
    await worker.stop();
    // Queued for the archive, not copied: the archive knows nothing of it.
    expect(await h.ctx.archive!.pool.query('SELECT 1 FROM archived_runs WHERE run_id = $1', [runId])).toMatchObject({
      rowCount: 0,
    });
    expect(await redisHits(mark)).not.toEqual([]);

    const res = await erase({ tenant: 'acme', field: { name: 'customer', value: `${mark}@example.com` } });
    expect(res.status).toBe(201);
    expect(((await res.json()) as { runIds: string[] }).runIds).toEqual([runId]);
    expect(await redisHits(mark)).toEqual([]);
    // Nor the index keys, which name a digest of each value.
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'searchKeys')).toBeNull();
    // Gone from its search indexes too: the value finds nothing now.
    const found = await fetch(`${url}/v1/runs?customer=${encodeURIComponent(`${mark}@example.com`)}`, {
      headers: producerAuth,
    });
    expect(((await found.json()) as { runs: unknown[] }).runs).toEqual([]);
    // Its later copy carries the marker, not the text, nor the index keys.
    await archiver.pass();
    expect(await archiveHits(mark)).toEqual([]);
    const copied = await h.ctx.archive!.pool.query('SELECT record FROM archived_runs WHERE run_id = $1', [runId]);
    expect(copied.rows[0].record).not.toHaveProperty('searchKeys');
  });

  it('finds a run past Redis retention by subject and by search field, from the archive; a run in both once', async () => {
    const tag = randomBytes(6).toString('hex');
    const subject = `SRCH-${tag}`;
    const email = `srch-${tag}@example.com`;
    const worker = await h.startWorker();
    const runId = await postRun({ ...sampleTicket(subject), customer: { email, name: 'Ada' } }, `srch-${tag}`);
    expect(await h.waitForStatus(runId, DONE, 20_000)).toBe('completed');
    await worker.stop();
    await archiver.archiveOne(runId, h.ctx.keys.archiveQueue(h.ctx.keys.shardOf(runId)));

    // The archive stores the agent's search fields, the names Redis indexes the run by.
    const row = await h.ctx.archive!.pool.query('SELECT search_fields FROM archived_runs WHERE run_id = $1', [runId]);
    expect(row.rows[0]).toEqual({ search_fields: { customer: email, ticket: subject } });

    const search = async (query: string, auth: Record<string, string> = producerAuth) => {
      const res = await fetch(`${url}/v1/runs?${query}`, { headers: auth });
      expect(res.status).toBe(200);
      return ((await res.json()) as { runs: { runId: string; status: string; subject: string }[] }).runs;
    };
    const queries = [
      `subject=${subject}`,
      `customer=${encodeURIComponent(email)}`,
      `field.ticket=${subject}`,
      `subject=${subject}&customer=${encodeURIComponent(email)}`,
    ];
    // In Redis and in the archive: listed once.
    for (const q of queries)
      expect(
        (await search(q)).map((r) => r.runId),
        q,
      ).toEqual([runId]);

    const k = h.ctx.keys.run(runId);
    await until('the run keys to expire', RETENTION_MS + 10_000, async () => (await h.ctx.redis.exists(k.run)) === 0);
    for (const q of queries) {
      const runs = await search(q);
      expect(runs, q).toMatchObject([{ runId, status: 'completed', subject }]);
    }
    // Tenant scoping as in Redis: acme's operator finds it, globex's does not; another value finds nothing.
    expect(
      await search(`customer=${encodeURIComponent(email)}`, { authorization: `Bearer ${ACME_TOKEN}` }),
    ).toHaveLength(1);
    expect(await search(`customer=${encodeURIComponent(email)}`, { authorization: `Bearer ${GLOBEX_TOKEN}` })).toEqual(
      [],
    );
    expect(await search(`customer=other-${email}`)).toEqual([]);
    expect(await search(`subject=${subject}&field.ticket=other`)).toEqual([]);
  });
  it('serves a run Redis let go from the archive on the console (chain, input, times, timeline) and as SSE', async () => {
    const tag = randomBytes(6).toString('hex');
    const subject = `CHN-${tag}`;
    const worker = await h.startWorker();
    const gone = await postRun(sampleTicket(subject), `chn-a-${tag}`);
    expect(await h.waitForStatus(gone, DONE, 20_000)).toBe('completed');
    await journalPacked(gone);
    await archiver.archiveOne(gone, h.ctx.keys.archiveQueue(h.ctx.keys.shardOf(gone)));
    const fromRedis = await sse(gone);
    expect(fromRedis.at(-2)).toMatch(/ status_changed /);
    // Ended: a client is told to come back no sooner than ENDED_RETRY_MS, from the archive too (below).
    expect(fromRedis.at(-1)).toBe(`retry ${ENDED_RETRY_MS}`);
    const k = h.ctx.keys.run(gone);
    await until('the run keys to expire', RETENTION_MS + 10_000, async () => (await h.ctx.redis.exists(k.run)) === 0);
    // Its events as the archive holds them: the same ids, types and data, resumable after any of them.
    expect(await sse(gone)).toEqual(fromRedis);
    const third = fromRedis[2]!.split(' ')[0]!;
    expect(await sse(gone, third)).toEqual(fromRedis.slice(3));
    // Another tenant's operator is told it is unknown, as for its view.
    const foreign = await fetch(`${url}/v1/runs/${gone}/events`, {
      headers: { authorization: `Bearer ${GLOBEX_TOKEN}` },
    });
    expect(foreign.status).toBe(404);
    // A later run of the same ticket, still in Redis.
    const hot = await postRun(sampleTicket(subject), `chn-b-${tag}`);
    expect(await h.waitForStatus(hot, DONE, 20_000)).toBe('completed');
    await worker.stop();

    const consolePage = async (runId: string) => {
      const res = await fetch(`${url}/console/runs/${runId}`, { headers: { authorization: `Bearer ${ACME_TOKEN}` } });
      expect(res.status, runId).toBe(200);
      return res.text();
    };
    const chainOf = (page: string) =>
      [...(/<table id="chain">[\s\S]*?<\/table>/.exec(page)?.[0] ?? '').matchAll(/<tr data-run="([^"]+)"/g)].map(
        (m) => m[1],
      );
    // The ticket's whole chain, oldest first, on both pages: the run from the archive and the one from Redis.
    const goneHtml = await consolePage(gone);
    expect(chainOf(goneHtml)).toEqual([gone, hot]);
    expect(chainOf(await consolePage(hot))).toEqual([gone, hot]);
    // The archived run's input, its steps on the timeline, a time on its conversation entries.
    expect(/<pre id="input">([\s\S]*?)<\/pre>/.exec(goneHtml)?.[1]).toContain(subject);
    expect(goneHtml).toContain('<svg id="timeline-svg"');
    expect(goneHtml).not.toContain('no steps recorded');
    // Read only, whatever its status: an archived run no operation can reach shows no form to act on it.
    await h.ctx.archive!.pool.query(
      `UPDATE archived_runs SET view = jsonb_set(view, '{status}', '"failed"') WHERE run_id = $1`,
      [gone],
    );
    const failedHtml = await consolePage(gone);
    expect(failedHtml).toContain('id="archived-note"');
    // Nothing to follow live: the page names no event stream.
    expect(failedHtml).not.toContain('data-events=');
    expect(failedHtml).not.toContain('id="retry-form"');
    expect(await consolePage(hot)).not.toContain('id="archived-note"');
  });

  it('lists runs by status and time over Redis and the archive: each run once, where it stands, page by page', async () => {
    const since = Date.now();
    const worker = await h.startWorker();
    const tag = randomBytes(6).toString('hex');
    const done = async (n: string) => {
      const runId = await postRun(sampleTicket(`LST-${tag}-${n}`), `lst-${tag}-${n}`);
      expect(await h.waitForStatus(runId, DONE, 20_000)).toBe('completed');
      return runId;
    };
    // Archived and let go by Redis.
    const gone = await done('a');
    await archiver.archiveOne(gone, h.ctx.keys.archiveQueue(h.ctx.keys.shardOf(gone)));
    await until(
      'the run keys to expire',
      RETENTION_MS + 10_000,
      async () => (await h.ctx.redis.exists(h.ctx.keys.run(gone).run)) === 0,
    );
    // In both: its archive row says failed, Redis (where it stands now) says completed.
    const both = await done('b');
    const snap = await snapshotRun(h.ctx, both, (id) => runView(h.ctx, id, (r) => ledgerFor(h.ctx).listForRun(r)));
    expect(await upsertArchivedRun(h.ctx.archive!.pool, { ...snap!.row, status: 'failed' })).toBe(true);
    // In Redis only.
    const hot = await done('c');
    await worker.stop();

    const list = async (query: string, auth: Record<string, string> = producerAuth) => {
      const res = await fetch(`${url}/v1/runs?since=${since}&${query}`, { headers: auth });
      expect(res.status, query).toBe(200);
      return (await res.json()) as { runs: { runId: string; status: string }[]; nextCursor?: string };
    };
    const ours = (runs: { runId: string }[]) => runs.filter((r) => [gone, both, hot].includes(r.runId));
    expect(ours((await list('status=completed')).runs)).toEqual([
      expect.objectContaining({ runId: hot, status: 'completed' }),
      expect.objectContaining({ runId: both, status: 'completed' }),
      expect.objectContaining({ runId: gone, status: 'completed' }),
    ]);
    expect(ours((await list('status=failed')).runs)).toEqual([]);
    // Page by page, one run a page: every run once, newest change first, across both stores.
    const walked: string[] = [];
    let cursor: string | undefined;
    for (let i = 0; i < 20; i++) {
      const page = await list(`tenant=acme&limit=1${cursor ? `&cursor=${cursor}` : ''}`);
      walked.push(...page.runs.map((r) => r.runId));
      cursor = page.nextCursor;
      if (!cursor) break;
    }
    expect(walked.filter((id) => [gone, both, hot].includes(id))).toEqual([hot, both, gone]);
    expect(new Set(walked).size).toBe(walked.length);
    // Tenant scoping as in Redis; the time range applies to the archive's runs too.
    expect(ours((await list('status=completed', { authorization: `Bearer ${ACME_TOKEN}` })).runs)).toHaveLength(3);
    expect(ours((await list('status=completed', { authorization: `Bearer ${GLOBEX_TOKEN}` })).runs)).toEqual([]);
    expect(ours((await list(`until=${since}`)).runs)).toEqual([]);
  });

  it("draws a run tree whose runs Redis let go from the archive's links", async () => {
    const tag = randomBytes(6).toString('hex');
    const [parent, child, grandchild] = ['p', 'c', 'g'].map((x) => `r_${tag}${x}${'0'.repeat(10)}`);
    const row = (runId: string, childRunIds: string[], status: string) =>
      archivedRow(runId, `TREE-${tag}`, status, { childRunIds });
    const pool = h.ctx.archive!.pool;
    await upsertArchivedRun(pool, row(parent!, [child!], 'completed'));
    await upsertArchivedRun(pool, row(child!, [grandchild!], 'failed'));
    await upsertArchivedRun(pool, row(grandchild!, [], 'cancelled'));
    expect(await runTree(h.ctx, parent!, 'completed')).toEqual({
      runId: parent,
      status: 'completed',
      children: [
        { runId: child, status: 'failed', children: [{ runId: grandchild, status: 'cancelled', children: [] }] },
      ],
    });
  });
});

describe("an archived run's children", () => {
  it('are served with their statuses as they stand now: from Redis, else from their archive rows', async () => {
    const tag = randomBytes(6).toString('hex');
    // Run ids as the API takes them: r_ and 24 hex digits.
    const [parent, cold, gone] = ['a', 'b', 'c'].map((x) => `r_${tag}${x}${'0'.repeat(11)}`);
    // A child Redis holds: a real run, queued (no worker here), archived with its parent as running.
    const hot = await postRun(sampleTicket(`KIDS-${tag}`), `kids-${tag}`);
    const row = (runId: string, status: string, view: Record<string, unknown>) =>
      archivedRow(runId, `KIDS-${tag}`, status, { view });
    const children = [cold, hot, gone].map((runId) => ({ runId, status: 'running' }));
    const pool = h.ctx.archive!.pool;
    await upsertArchivedRun(pool, row(parent!, 'cancelled', { runId: parent, status: 'cancelled', children }));
    // Archived after its parent, ended since.
    await upsertArchivedRun(pool, row(cold!, 'completed', { runId: cold, status: 'completed' }));
    const res = await fetch(`${url}/v1/runs/${parent}`, { headers: producerAuth });
    expect(res.status).toBe(200);
    const view = (await res.json()) as { status: string; children: { runId: string; status: string }[] };
    expect(view.status).toBe('cancelled');
    expect(view.children).toEqual([
      { runId: cold, status: 'completed' },
      { runId: hot, status: (await h.ctx.redis.hget(h.ctx.keys.run(hot).run, 'status'))! },
      // Neither Redis nor the archive holds it: as archived.
      { runId: gone, status: 'running' },
    ]);
    expect(view.children[1]!.status).not.toBe('running');
  });
});

describe('erasure without an archive', () => {
  let bare: Harness;
  let bareUrl: string;
  beforeAll(async () => {
    bare = await createHarness('erasure-bare', { OPERATOR_TOKEN });
    bareUrl = (await bare.startApi()).url;
  }, 60_000);
  afterAll(async () => {
    await bare?.close();
  });

  it('erases by a search field from Redis alone', async () => {
    const mark = `BARE-ME-${randomBytes(8).toString('hex')}`;
    const worker = await bare.startWorker();
    const res = await fetch(`${bareUrl}/v1/runs`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...producerAuth,
        'idempotency-key': `bare-${randomBytes(6).toString('hex')}`,
      },
      body: JSON.stringify({
        tenant: 'acme',
        ticket: {
          ...sampleTicket(`BARE-${randomBytes(4).toString('hex')}`),
          body: `hello ${mark}`,
          customer: { email: `${mark}@example.com`, name: 'Ada' },
        },
      }),
    });
    const { runId } = (await res.json()) as { runId: string };
    expect(await bare.waitForStatus(runId, DONE, 20_000)).toBe('completed');
    await worker.stop();
    expect(await redisHits(mark)).not.toEqual([]);

    const erased = await fetch(`${bareUrl}/v1/erasures`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...operatorAuth },
      body: JSON.stringify({ tenant: 'acme', field: { name: 'customer', value: `${mark}@example.com` } }),
    });
    expect(erased.status).toBe(201);
    expect(((await erased.json()) as { runIds: string[] }).runIds).toEqual([runId]);
    expect(await redisHits(mark)).toEqual([]);
  });
});
