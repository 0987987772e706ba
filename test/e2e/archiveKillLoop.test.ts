/**
 * The archive under a kill loop, in real processes: reconciler processes (each runs the archiver) SIGKILLed at
 * random while they archive and replaced, the archive's PostgreSQL restarted once, and many one-turn runs ending
 * meanwhile (an API and a worker in this process, ARCHIVE_URL set on both, so every end queues the run for its copy).
 * Small batches and a short interval keep the archivers copying at every instant, so kills land between a row's
 * commit and the run's mark, and between a read and a write.
 *
 * Checked while it runs: every run that Redis has let go of (a TTL on its hash) has its archive row (a run expiring
 * before its row existed would be lost). Checked afterwards: every run ended and archived exactly once (one row,
 * `versions` 1: a copy taken again after a kill changed nothing), and no run left on an archive queue.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { createHarness, producerAuth, type Harness } from '../../testkit/harness.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../testkit/embeddedPostgres.js';
import { killSpawned, spawnReconciler, type SpawnedProcess } from '../../testkit/processes.js';
import { readStatuses } from '../../src/store/runRecord.js';
import { isTerminal } from '../../src/core/status.js';
import { until } from '../../testkit/until.js';

const RUNS = 120;
const CHAOS_MS = 30_000;
const RECONCILERS = 3;
/** Kills fall at random in this window after the previous one. */
const KILL_EVERY_MS = [300, 1500] as const;
const usage = { promptTokens: 10, completionTokens: 2 };

let db: EmbeddedPostgres;
let h: Harness;
let apiUrl: string;
let archive: pg.Pool;
const reconcilers = new Set<SpawnedProcess>();
/** Reconcilers still starting (awaited before the checks, so none is left behind). */
const starting = new Set<Promise<void>>();

beforeAll(async () => {
  db = await startEmbeddedPostgres();
  h = await createHarness('archive-kill-loop', {
    ARCHIVE_URL: db.url,
    ARCHIVE_INTERVAL_MS: '50',
    ARCHIVE_BATCH: '3',
    ARCHIVE_LEASE_MS: '1000',
    // Short: runs leave Redis within the loop once archived, so an early expiry would show.
    RUN_RETENTION_MS: '1500',
    RECONCILER_SWEEP_MS: '500',
  });
  apiUrl = (await h.startApi()).url;
  await h.startWorker();
  archive = new pg.Pool({ connectionString: db.url, max: 2, connectionTimeoutMillis: 2000 });
  archive.on('error', () => {}); // the restart drops idle connections
}, 120_000);
afterAll(async () => {
  await killSpawned();
  await archive?.end().catch(() => {});
  await h?.close();
  await db?.stop();
});

async function startRun(i: number): Promise<string> {
  const res = await fetch(`${apiUrl}/v1/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': `archive-kill-${i}`, ...producerAuth },
    body: JSON.stringify({
      tenant: 'acme',
      agent: 'support',
      input: { id: `AK-${i}`, subject: 'Hello', body: 'A short run', customer: { email: 'a@example.com', name: 'A' } },
      model: 'scripted',
      script: [{ toolCalls: [], final: 'done', usage }],
    }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { runId: string }).runId;
}

function addReconciler(): Promise<void> {
  const p = spawnReconciler(h.env, { keep: 'lifecycle' }).then((r) => {
    reconcilers.add(r);
    void r.exited.then(() => reconcilers.delete(r));
  });
  starting.add(p);
  void p.finally(() => starting.delete(p)).catch(() => {});
  return p;
}

/** Archive rows of `runIds`: run id -> versions (undefined while PostgreSQL restarts). */
async function rowsOf(runIds: string[]): Promise<Map<string, number> | undefined> {
  try {
    const res = await archive.query<{ run_id: string; versions: number }>(
      'SELECT run_id, versions FROM archived_runs WHERE run_id = ANY($1)',
      [runIds],
    );
    return new Map(res.rows.map((r) => [r.run_id, r.versions]));
  } catch {
    return undefined;
  }
}

/** Runs whose hash has a TTL (Redis will let them go), read before the archive is asked. */
async function runsWithTtl(runIds: string[]): Promise<string[]> {
  const ttls = await Promise.all(runIds.map((id) => h.ctx.redis.pttl(h.ctx.keys.run(id).run)));
  return runIds.filter((_, i) => ttls[i]! > 0);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('the archive under a kill loop', () => {
  it('every ended run archived exactly once, none let go by Redis before its row existed', async () => {
    await Promise.all(Array.from({ length: RECONCILERS }, () => addReconciler()));
    const runIds: string[] = [];
    const expiredWithoutRow = new Set<string>();
    let samples = 0;
    let kills = 0;
    let done = false;
    const started = Date.now();

    // Runs arrive through the whole loop.
    const producer = (async () => {
      for (let i = 0; i < RUNS; i++) {
        runIds.push(await startRun(i));
        await sleep(CHAOS_MS / RUNS / 2); // the arrivals' schedule: through the first half of the loop
      }
    })();

    // A TTL is set only by the script that marks a run archived, after its row was committed: a run with a TTL and
    // no row is one Redis could lose. Read the TTLs first, then the rows (a row never goes away in this test).
    const sampler = (async () => {
      while (!done) {
        const withTtl = await runsWithTtl([...runIds]);
        const rows = await rowsOf(withTtl);
        if (rows) {
          samples++;
          for (const id of withTtl) if (!rows.has(id)) expiredWithoutRow.add(id);
        }
        await sleep(100); // the sampler's period, while the loop runs
      }
    })();

    // SIGKILL a random archiver (reconciler process) every so often and start another one.
    const killer = (async () => {
      while (Date.now() - started < CHAOS_MS) {
        // The kill loop's pace: the behaviour under test.
        await sleep(KILL_EVERY_MS[0] + Math.random() * (KILL_EVERY_MS[1] - KILL_EVERY_MS[0]));
        const live = [...reconcilers].filter((r) => r.child.exitCode === null);
        const victim = live[Math.floor(Math.random() * live.length)];
        if (!victim) continue;
        victim.child.kill('SIGKILL');
        kills++;
        void addReconciler();
      }
    })();

    // PostgreSQL restarted once, midway, while archivers copy.
    await sleep(CHAOS_MS / 2); // the restart's place in the loop's schedule
    await db.restart();
    await Promise.all([producer, killer]);
    await Promise.all(starting);

    // Settle: at least one archiver alive, every run ended and copied, every archive queue empty.
    if (![...reconcilers].some((r) => r.child.exitCode === null)) await addReconciler();
    await until('every run ended and archived', 60_000, async () => {
      const statuses = await readStatuses(h.ctx.redis, h.ctx.keys, runIds);
      if (statuses.some((s) => s !== undefined && !isTerminal(s))) return false;
      const rows = await rowsOf(runIds);
      if (!rows || rows.size < runIds.length) return false;
      const queued = await Promise.all(
        h.ctx.keys.allShards().map((s) => h.ctx.redis.zcard(h.ctx.keys.archiveQueue(s))),
      );
      return queued.every((n) => n === 0);
    });
    done = true;
    await sampler;

    const rows = (await rowsOf(runIds))!;
    const notOnce = runIds.filter((id) => rows.get(id) !== 1);
    console.log(
      `archive kill loop: ${runIds.length} runs, ${kills} archiver kills, 1 PostgreSQL restart, ${samples} TTL ` +
        `samples, ${Date.now() - started} ms`,
    );
    expect(runIds).toHaveLength(RUNS);
    expect(kills).toBeGreaterThanOrEqual(RECONCILERS);
    expect(samples).toBeGreaterThan(0);
    expect([...expiredWithoutRow]).toEqual([]);
    expect(notOnce).toEqual([]);
    expect(rows.size).toBe(RUNS);
  }, 120_000);
});
