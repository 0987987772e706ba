/**
 * Section "archive": the cost of keeping ended runs in PostgreSQL (src/archive) and of reading them back.
 *
 * - Archiver CPU per ended run: runs of two steps end with ARCHIVE_URL set (an in-process worker), then the archiver
 *   copies them in passes in this process, nothing else running; process.cpuUsage() over the passes / runs copied
 *   (the archiver's own work and its PostgreSQL and Redis clients; PostgreSQL's server CPU is not counted).
 * - Bytes per run in PostgreSQL: pg_total_relation_size('archived_runs') (table, TOAST, indexes) / rows.
 * - Reads from the archive: 1,000,000 rows (`--quick`: 20,000) seeded from real archived runs (bench/lib/archiveSeed.ts:
 *   set-based inserts, the migration's indexes built again, VACUUM ANALYZE), then GET /v1/runs/:id of random seeded
 *   ids through the API (none in Redis: Redis misses, the archive answers), one at a time over keep-alive, and a
 *   ticket's runs by (tenant, subject key), the archive's own lookup (an erasure's), and pages of the listing
 *   (GET /v1/runs?status=completed&until=, a tenant's and every tenant's) ending at a random time of the seeded 30
 *   days, and a ticket's runs through the API's search (GET /v1/runs?subject=): p50/p99 of each.
 */
import { Agent, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadConfig } from '../../src/config/config.js';
import { createContext } from '../../src/server/buildContext.js';
import { createLogger } from '../../src/metrics/log.js';
import { newMetrics } from '../../src/metrics/metrics.js';
import { FleetWorker } from '../../src/worker/fleetWorker.js';
import { createEffectRunner } from '../../src/ledger/runner.js';
import { createFullApi } from '../../src/http/fullApi.js';
import { archiverFor } from '../../src/server/archiving.js';
import { startEmbeddedPostgres } from '../../testkit/embeddedPostgres.js';
import { PRODUCER_TOKEN } from '../../testkit/harness.js';
import { until } from '../../testkit/until.js';
import { createRun, oneEffectScript, readOnlyScript } from '../lib/workload.js';
import { seedArchive, seededRunId, seededSubject } from '../lib/archiveSeed.js';
import { archivedRunsOfSubject } from '../../src/archive/db.js';
import { dist, round } from '../lib/stats.js';
import {
  type BenchEnv,
  type BenchOptions,
  type Metric,
  type Section,
  type SectionResult,
  atMost,
  metric,
} from '../lib/types.js';

/** Support runs of five steps with an email, archived as templates beside the two-step runs. */
const EFFECT_TEMPLATES = 4;

export const archive: Section = {
  name: 'archive',
  title: 'Archive: archiver CPU and PostgreSQL bytes per run, reads served from the archive',
  async run(env: BenchEnv, opts: BenchOptions): Promise<SectionResult> {
    const runs = opts.quick ? 200 : 1000;
    const seeded = opts.quick ? 20_000 : 1_000_000;
    const smallRows = opts.quick ? 2_000 : 20_000;
    const reads = opts.quick ? 500 : 3000;
    const db = await startEmbeddedPostgres();
    env.onCleanup(() => db.stop());
    const cfg = loadConfig({ ...env.appEnv, ARCHIVE_URL: db.url, ARCHIVE_BATCH: '500', PRODUCER_TOKEN });
    const ctx = await createContext(cfg, 'bench-archive', {
      log: createLogger('bench-archive', cfg.LOG_LEVEL),
      metrics: newMetrics(),
    });
    env.onCleanup(() => ctx.close());
    const pool = ctx.archive!.pool;
    const queued = async () => {
      const n = await Promise.all(ctx.keys.allShards().map((s) => ctx.redis.zcard(ctx.keys.archiveQueue(s))));
      return n.reduce((a, b) => a + b, 0);
    };

    // Runs that end with an archive configured: queued for their copy, no TTL.
    const worker = new FleetWorker(ctx, { effects: createEffectRunner(ctx) });
    await worker.start();
    for (let i = 0; i < runs; i++) await createRun(ctx, `ARC-${i}`, readOnlyScript(2), { maxSteps: 4 });
    await until('every bench run ended and queued for the archive', 120_000, async () => (await queued()) >= runs, 50);
    await worker.stop();

    // The archiver alone: passes until the queues are empty.
    const archiver = archiverFor(ctx, 'archiver:bench')!;
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    let copied = 0;
    while ((await queued()) > 0) copied += (await archiver.pass()).archived;
    const cpu = process.cpuUsage(cpu0);
    const wallMs = performance.now() - t0;
    const cpuUsPerRun = (cpu.user + cpu.system) / copied;
    const sized = await pool.query<{ bytes: string; rows: string }>(
      "SELECT pg_total_relation_size('archived_runs') AS bytes, (SELECT count(*) FROM archived_runs) AS rows",
    );
    const bytesPerRun = Number(sized.rows[0]!.bytes) / Number(sized.rows[0]!.rows);

    // Templates beside the two-step runs: support runs of five steps with an email through the ledger (the view holds
    // the effect and its history), archived outside the measure above.
    const worker2 = new FleetWorker(ctx, { effects: createEffectRunner(ctx) });
    await worker2.start();
    for (let i = 0; i < EFFECT_TEMPLATES; i++)
      await createRun(ctx, `ARC-E${i}`, oneEffectScript(5, `c-arce${i}@example.com`, 2), { maxSteps: 8 });
    await until('the effect runs ended', 120_000, async () => (await queued()) >= EFFECT_TEMPLATES, 50);
    await worker2.stop();
    while ((await queued()) > 0) await archiver.pass();
    const templates = (
      await pool.query<{ run_id: string }>(
        `(SELECT run_id FROM archived_runs WHERE subject_key LIKE 'ARC-E%')
         UNION ALL (SELECT run_id FROM archived_runs WHERE subject_key NOT LIKE 'ARC-E%' LIMIT $1)`,
        [EFFECT_TEMPLATES],
      )
    ).rows.map((r) => r.run_id);

    // Reads: GET /v1/runs/:id of seeded runs (never in Redis: Redis misses, the archive answers), one at a time over
    // keep-alive; then a ticket's runs by (tenant, subject key), the archive's own lookup (an erasure's).
    const server = await new Promise<Server>((resolve) => {
      const s = createFullApi(ctx, () => true).listen(0, '127.0.0.1', () => resolve(s));
    });
    env.onCleanup(() => void server.close());
    const port = (server.address() as AddressInfo).port;
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    env.onCleanup(() => agent.destroy());
    /** GET `path` as the producer: its status and body. */
    const getPath = (path: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request(
          { host: '127.0.0.1', port, path, agent, headers: { authorization: `Bearer ${PRODUCER_TOKEN}` } },
          (res) => {
            let body = '';
            res.setEncoding('utf8');
            res.on('data', (c: string) => (body += c));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          },
        );
        req.on('error', reject);
        req.end();
      });
    const get = async (id: string) => (await getPath(`/v1/runs/${id}`)).status;
    const measure = async (rowsSeeded: number) => {
      const pick = () => 1 + Math.floor(Math.random() * rowsSeeded);
      for (let i = 0; i < 50; i++) await get(seededRunId(pick())); // warm up
      const latencies: number[] = [];
      const statuses: Record<string, number> = {};
      for (let i = 0; i < reads; i++) {
        const t = performance.now();
        const status = await get(seededRunId(pick()));
        latencies.push(performance.now() - t);
        statuses[status] = (statuses[status] ?? 0) + 1;
      }
      const subjectLatencies: number[] = [];
      let misses = 0;
      for (let i = 0; i < reads; i++) {
        const { tenant, subjectKey } = seededSubject(pick());
        const t = performance.now();
        const found = await archivedRunsOfSubject(pool, tenant, subjectKey);
        subjectLatencies.push(performance.now() - t);
        if (found.length !== 2) misses++;
      }
      // A page of the listing deep in the archive: a tenant's completed runs that ended before a time in the last 30
      // days (the index of migration 003), and every tenant's (the index on the end alone).
      const listing = async (scoped: boolean) => {
        const out: number[] = [];
        for (let i = 0; i < reads / 10; i++) {
          const until = Date.now() - Math.floor(Math.random() * 30 * 24 * 3600_000);
          const tenant = scoped ? `&tenant=tenant-${i % 4}` : '';
          const t = performance.now();
          const { status } = await getPath(`/v1/runs?status=completed${tenant}&until=${until}&limit=50`);
          out.push(performance.now() - t);
          if (status !== 200) throw new Error(`listing answered ${status}`);
        }
        return dist(out);
      };
      const listTenant = await listing(true);
      const listAll = await listing(false);
      // A search by a ticket through the API (Redis' indexes and the archive's, merged).
      const searched: number[] = [];
      let searchMisses = 0;
      for (let i = 0; i < reads / 10; i++) {
        const { subjectKey } = seededSubject(pick());
        const t = performance.now();
        const { status, body } = await getPath(`/v1/runs?subject=${subjectKey}`);
        searched.push(performance.now() - t);
        if (status !== 200) throw new Error(`search answered ${status}`);
        if ((JSON.parse(body) as { runs: unknown[] }).runs.length !== 2) searchMisses++;
      }
      return {
        read: dist(latencies),
        statuses,
        subject: dist(subjectLatencies),
        misses,
        listTenant,
        listAll,
        search: dist(searched),
        searchMisses,
      };
    };

    // The same reads on a small archive first, in the same sitting: what the row count changes, apart from the load
    // of a shared machine.
    const small = await seedArchive(db.url, templates, { from: 1, to: smallRows, total: seeded });
    const atSmall = await measure(smallRows);
    const seed = await seedArchive(db.url, templates, { from: smallRows + 1, to: seeded, total: seeded });
    const total = await pool.query<{ bytes: string; rows: string }>(
      "SELECT pg_total_relation_size('archived_runs') AS bytes, (SELECT count(*) FROM archived_runs) AS rows",
    );
    const rows = Number(total.rows[0]!.rows);
    const seededBytesPerRow = Number(total.rows[0]!.bytes) / rows;
    const atFull = await measure(seeded);
    const { read: d, statuses, subject: ds, misses: subjectMisses, listTenant, listAll, search } = atFull;

    const metrics: Metric[] = [
      metric({
        key: 'archiverCpuUsPerRun',
        label: 'archiver CPU per ended run',
        value: round(cpuUsPerRun),
        unit: 'us',
        note: `${copied} runs in ${round(wallMs)} ms`,
      }),
      metric({
        key: 'archiveBytesPerRun',
        label: 'PostgreSQL bytes per archived run',
        value: Math.round(bytesPerRun),
        unit: 'B',
        note: 'pg_total_relation_size / rows, 2-step runs',
      }),
      metric({
        key: 'archiveRows',
        label: 'rows in the archive for the reads',
        value: rows,
        unit: 'rows',
        note:
          `${small.seeded + seed.seeded} seeded from ${templates.length} archived runs in ` +
          `${round(small.loadSeconds + seed.loadSeconds)} s, ` +
          `indexes ${round(small.indexSeconds + seed.indexSeconds)} s, ` +
          `VACUUM ANALYZE ${round(small.vacuumSeconds + seed.vacuumSeconds)} s`,
      }),
      metric({
        key: 'archiveSeededBytesPerRow',
        label: 'PostgreSQL bytes per row of the read table',
        value: Math.round(seededBytesPerRow),
        unit: 'B',
        note: 'half 2-step runs, half 5-step runs with an email',
      }),
      metric({
        key: 'archiveReadP50Ms',
        label: 'GET /v1/runs/:id from the archive, p50',
        value: round(d.p50),
        unit: 'ms',
      }),
      atMost(
        'archiveReadP99Ms',
        'GET /v1/runs/:id from the archive, p99',
        round(d.p99),
        'ms',
        100,
        `${reads} reads, statuses ${JSON.stringify(statuses)}`,
      ),
      metric({
        key: 'archiveReadSmallP50Ms',
        label: `GET /v1/runs/:id at ${smallRows.toLocaleString('en-US')} rows, same sitting, p50`,
        value: round(atSmall.read.p50),
        unit: 'ms',
      }),
      metric({
        key: 'archiveReadSmallP99Ms',
        label: `GET /v1/runs/:id at ${smallRows.toLocaleString('en-US')} rows, same sitting, p99`,
        value: round(atSmall.read.p99),
        unit: 'ms',
        note: `statuses ${JSON.stringify(atSmall.statuses)}`,
      }),
      metric({
        key: 'archiveSubjectP50Ms',
        label: "a ticket's runs from the archive (tenant, subject), p50",
        value: round(ds.p50),
        unit: 'ms',
      }),
      atMost(
        'archiveSubjectP99Ms',
        "a ticket's runs from the archive (tenant, subject), p99",
        round(ds.p99),
        'ms',
        100,
        `${reads} lookups, ${subjectMisses} not finding the ticket's 2 runs`,
      ),
      metric({
        key: 'archiveSearchP50Ms',
        label: "GET /v1/runs?subject= (a ticket's runs, Redis' and the archive's search merged), p50",
        value: round(search.p50),
        unit: 'ms',
      }),
      atMost(
        'archiveSearchP99Ms',
        "GET /v1/runs?subject= (a ticket's runs, Redis' and the archive's search merged), p99",
        round(search.p99),
        'ms',
        100,
        `${reads / 10} searches, ${atFull.searchMisses} not finding the ticket's 2 runs`,
      ),
      metric({
        key: 'archiveListTenantP50Ms',
        label: "GET /v1/runs?status=&tenant=&until=&limit=50, a tenant's page from the archive, p50",
        value: round(listTenant.p50),
        unit: 'ms',
      }),
      atMost(
        'archiveListTenantP99Ms',
        "GET /v1/runs?status=&tenant=&until=&limit=50, a tenant's page from the archive, p99",
        round(listTenant.p99),
        'ms',
        100,
        `${reads / 10} pages, Redis' listing merged in`,
      ),
      metric({
        key: 'archiveListAllP99Ms',
        label: "GET /v1/runs?status=&until=&limit=50, every tenant's page from the archive, p99",
        value: round(listAll.p99),
        unit: 'ms',
        note: `p50 ${round(listAll.p50)} ms`,
      }),
    ];
    return {
      name: 'archive',
      title: archive.title,
      metrics,
      details: { atFull, atSmall: { rows: smallRows, ...atSmall }, small, seed },
    };
  },
};
