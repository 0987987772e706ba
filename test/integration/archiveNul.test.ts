/**
 * A run whose customer text holds a NUL character (U+0000: the intake takes any JSON string) and the archive (a real
 * PostgreSQL from PATH, whose text and jsonb hold no NUL). The run is archived on the first pass, with no failure
 * logged; once Redis let it go the API serves the same body, its search by subject and field finds it, its events are
 * the same, and an erasure by its subject rewrites its row (src/archive/pgText.ts). A write PostgreSQL refuses is
 * logged with the error's code and message, never the JSON the error quotes (src/metrics/log.ts).
 */
import { captureLines } from '../support/logCapture.js';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, producerAuth, sampleTicket, type Harness } from '../../testkit/harness.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../testkit/embeddedPostgres.js';
import { until } from '../../testkit/until.js';
import { readSse } from '../../testkit/sse.js';
import { Compactor } from '../../src/runs/compactor.js';
import { archiverFor } from '../../src/server/archiving.js';
import { Archiver } from '../../src/archive/archiver.js';
import { createLogger } from '../../src/metrics/log.js';
import { runView } from '../../src/http/runView.js';
import { ledgerFor } from '../../src/ledger/ledger.js';
import type { EngineContext } from '../../src/runs/engineContext.js';

const OPERATOR_TOKEN = 'operator-token-for-archive-nul-tests';
const operatorAuth = { authorization: `Bearer ${OPERATOR_TOKEN}` };
const RETENTION_MS = 1500;
const DONE = ['completed', 'failed', 'budget_exceeded', 'needs_human', 'cancelled'];
let pg: EmbeddedPostgres;
let h: Harness;
let url: string;

beforeAll(async () => {
  pg = await startEmbeddedPostgres();
  h = await createHarness('archivenul', {
    ARCHIVE_URL: pg.url,
    RUN_RETENTION_MS: String(RETENTION_MS),
    OPERATOR_TOKEN,
  });
  url = (await h.startApi()).url;
}, 60_000);
afterAll(async () => {
  await h?.close();
  await pg?.stop();
});

/** A logger that keeps every line it writes, at info and above. */
function capturedLog(): { log: EngineContext['log']; text: () => string; lines: () => Record<string, unknown>[] } {
  const { stream, text, lines } = captureLines();
  return { log: createLogger('archivenul', 'info', stream), text, lines };
}

/** A ticket whose id, subject and body carry `tag`, the body a NUL in the middle of it. */
function nulTicket(tag: string) {
  return {
    ...sampleTicket(`NUL-${tag}`),
    subject: `Card stolen ${tag}`,
    body: `Please refund my card ${tag} right now ${tag}\u0000${tag} and after the nul ${tag}`,
    customer: { email: `nul-${tag}@example.com`, name: `Ada ${tag}` },
  };
}

async function postRun(ticket: unknown, eventKey: string): Promise<string> {
  const res = await fetch(`${url}/v1/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...producerAuth, 'idempotency-key': eventKey },
    body: JSON.stringify({ tenant: 'acme', ticket }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { runId: string }).runId;
}

async function getView(runId: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}/v1/runs/${runId}`, { headers: producerAuth });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function sse(runId: string): Promise<string[]> {
  const res = await fetch(`${url}/v1/runs/${runId}/events`, { headers: producerAuth });
  expect(res.status).toBe(200);
  return (await readSse(res)).events.map((e) => `${e.id} ${e.event} ${e.data}`);
}

async function endedRun(ticket: ReturnType<typeof nulTicket>, eventKey: string): Promise<string> {
  const worker = await h.startWorker();
  try {
    const runId = await postRun(ticket, eventKey);
    expect(await h.waitForStatus(runId, DONE, 20_000)).toBe('completed');
    // An ended run's journal is packed beside the list (src/runs/compact.ts, by the reconciler's compactor): copied
    // once that is done.
    await new Compactor(h.ctx).drain();
    expect(await h.ctx.redis.exists(h.ctx.keys.run(runId).journalPacked)).toBe(1);
    return runId;
  } finally {
    await worker.stop();
  }
}

const queued = async (runId: string) =>
  (await h.ctx.redis.zscore(h.ctx.keys.archiveQueue(h.ctx.keys.shardOf(runId)), runId)) !== null;

describe('customer text with a NUL character in the archive', () => {
  it('is archived on the first pass with no failure logged, and read back from the archive as Redis served it', async () => {
    const tag = randomBytes(6).toString('hex');
    const ticket = nulTicket(tag);
    const runId = await endedRun(ticket, `nul-${tag}`);
    const fromRedis = await getView(runId);
    expect(fromRedis.status).toBe(200);
    expect(JSON.stringify(fromRedis.body)).toContain('\\u0000');
    const eventsFromRedis = await sse(runId);

    const out = capturedLog();
    const archiver = archiverFor({ ...h.ctx, log: out.log })!;
    expect(await archiver.pass()).toMatchObject({ archived: 1, failed: 0 });
    expect(await queued(runId)).toBe(false);
    expect(out.lines().map((l) => l.code)).toEqual(['run_archived']);
    expect(out.text()).not.toContain(tag);

    // Redis lets it go at the retention: the archive answers, the same body, NUL and all.
    const k = h.ctx.keys.run(runId);
    await until('the run keys to expire', RETENTION_MS + 10_000, async () => (await h.ctx.redis.exists(k.run)) === 0);
    const fromArchive = await getView(runId);
    expect(fromArchive.status).toBe(200);
    expect(fromArchive.body).toEqual(fromRedis.body);
    expect(fromArchive.body.key).toBe(ticket.id);
    expect(await sse(runId)).toEqual(eventsFromRedis);
    // What the console shows of it: its input as posted.
    expect((await h.ctx.archive!.details(runId))?.input).toEqual(ticket);

    // Its search fields and subject, as the archive holds them, find it (the query's value escaped the same way).
    const search = async (query: string) => {
      const res = await fetch(`${url}/v1/runs?${query}`, { headers: producerAuth });
      expect(res.status, query).toBe(200);
      return ((await res.json()) as { runs: { runId: string; subject: string; search?: unknown }[] }).runs;
    };
    expect(await search(`customer=${encodeURIComponent(ticket.customer.email)}`)).toMatchObject([
      { runId, subject: ticket.id },
    ]);
    expect(await search(`field.ticket=${encodeURIComponent(ticket.id)}`)).toMatchObject([{ runId }]);
    expect(await search(`subject=${encodeURIComponent(ticket.id)}`)).toMatchObject([{ runId }]);
  });

  it("an erasure by a subject holding a NUL rewrites the run's archive row and records the erasure", async () => {
    const tag = randomBytes(6).toString('hex');
    // Its subject (kept by the erasure, an audit's key) holds a NUL too; the text erased holds the tag.
    const ticket = { ...nulTicket(tag), id: `NUL-${randomBytes(6).toString('hex')}\u0000id` };
    // Its event key (kept: an audit's) names nothing of the text.
    const runId = await endedRun(ticket, `nul-er-${randomBytes(6).toString('hex')}`);
    expect(await archiverFor(h.ctx)!.pass()).toMatchObject({ archived: 1, failed: 0 });
    const res = await fetch(`${url}/v1/erasures`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...operatorAuth },
      body: JSON.stringify({ tenant: 'acme', subject: ticket.id }),
    });
    expect(res.status).toBe(201);
    const record = (await res.json()) as { runIds: string[]; erasureId: string; subject: string };
    expect(record).toMatchObject({ runIds: [runId], subject: ticket.id });
    expect((await h.ctx.archive!.pool.query('SELECT 1 FROM erasures WHERE id = $1', [record.erasureId])).rowCount).toBe(
      1,
    );
    const row = await h.ctx.archive!.pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM archived_runs WHERE run_id = $1 AND erased_at_ms > 0
         AND strpos(view::text || spec::text || events::text || record::text, $2) = 0`,
      [runId, tag],
    );
    expect(row.rows[0]!.n).toBe('1');
    // The audit keeps the subject, NUL and all: the view read back names it as Redis did.
    expect((await h.ctx.archive!.view(runId))?.key).toBe(ticket.id);
  });

  it('a write PostgreSQL refuses is logged by its code and message, no part of the text; the run stays queued', async () => {
    const tag = randomBytes(6).toString('hex');
    const runId = await endedRun(nulTicket(tag), `nul-refused-${tag}`);
    // The write as it was sent before src/archive/pgText.ts: the NUL as JSON's \u0000, which jsonb refuses.
    const pool = h.ctx.archive!.pool;
    const unescaped = new Proxy(pool, {
      get(target, prop, receiver) {
        if (prop !== 'query') return Reflect.get(target, prop, receiver);
        return (sql: string, params?: unknown[]) =>
          target.query(
            sql,
            params?.map((v) => (typeof v === 'string' ? v.replaceAll('\uffff0', '\\u0000') : v)),
          );
      },
    });
    const out = capturedLog();
    const ledger = ledgerFor(h.ctx);
    const refused = new Archiver({ ...h.ctx, log: out.log }, unescaped, (id) =>
      runView(h.ctx, id, (r) => ledger.listForRun(r)),
    );
    expect(await refused.pass()).toMatchObject({ archived: 0, failed: 1 });
    expect(await queued(runId)).toBe(true);
    const [line] = out.lines();
    expect(line).toMatchObject({
      code: 'archive_failed',
      runId,
      err: { type: 'DatabaseError', code: '22P05', message: 'unsupported Unicode escape sequence' },
    });
    expect(Object.keys(line!.err as object)).not.toContain('where');
    expect(Object.keys(line!.err as object)).not.toContain('detail');
    expect(out.text()).not.toContain(tag);
    expect(out.text()).not.toMatch(/refund|after the nul|Card stolen/i);

    // The archive as shipped takes it on its next pass.
    expect(await archiverFor(h.ctx)!.pass()).toMatchObject({ archived: 1, failed: 0 });
    expect(await queued(runId)).toBe(false);
  });
});
