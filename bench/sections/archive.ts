/**
 * Section "archive": the cost of keeping ended runs in PostgreSQL (src/archive) and of reading them back.
 *
 * - Archiver CPU per ended run: runs of two steps end with ARCHIVE_URL set (an in-process worker), then the archiver
 *   copies them in passes in this process, nothing else running; process.cpuUsage() over the passes / runs copied
 *   (the archiver's own work and its PostgreSQL and Redis clients; PostgreSQL's server CPU is not counted).
 * - Bytes per run in PostgreSQL: pg_total_relation_size('archived_runs') (table, TOAST, indexes) / rows.
 * - Reads from the archive: rows cloned from a real archived run (new run ids, INSERT ... SELECT generate_series)
 *   for about a minute or up to 1,000,000 rows, ANALYZE, then GET /v1/runs/:id of random cloned ids, none in Redis,
 *   one at a time over keep-alive: p50/p99 at the row count reached.
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
import { createRun, readOnlyScript } from '../lib/workload.js';
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

const TARGET_ROWS = 1_000_000;
const INSERT_BATCH = 50_000;

export const archive: Section = {
  name: 'archive',
  title: 'Archive: archiver CPU and PostgreSQL bytes per run, reads served from the archive',
  async run(env: BenchEnv, opts: BenchOptions): Promise<SectionResult> {
    const runs = opts.quick ? 200 : 1000;
    const fillMs = opts.quick ? 10_000 : 60_000;
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

    // Fill: clones of one real row under new run ids, as many as about a minute allows.
    const template = (await pool.query<{ run_id: string }>('SELECT run_id FROM archived_runs LIMIT 1')).rows[0]!.run_id;
    const fillStart = performance.now();
    let next = 1;
    while (performance.now() - fillStart < fillMs && next <= TARGET_ROWS) {
      const last = Math.min(next + INSERT_BATCH - 1, TARGET_ROWS);
      await pool.query(
        `INSERT INTO archived_runs
           SELECT 'r_' || lpad(to_hex(g), 24, '0'), tenant, agent, subject_key || '-' || g, status, reason,
                  created_at_ms, ended_at_ms, erased_at_ms, archived_at, previous_run_id, next_run_id, parent_run_id,
                  child_run_ids, view, spec, events, budget, record, search_fields, versions
           FROM archived_runs t, generate_series($2::bigint, $3::bigint) g WHERE t.run_id = $1
         ON CONFLICT (run_id) DO NOTHING`,
        [template, next, last],
      );
      next = last + 1;
    }
    const fillSeconds = (performance.now() - fillStart) / 1000;
    await pool.query('ANALYZE archived_runs');
    const rows = Number((await pool.query<{ n: string }>('SELECT count(*) AS n FROM archived_runs')).rows[0]!.n);
    const cloned = next - 1;

    // Reads: GET /v1/runs/:id of cloned runs (never in Redis), one at a time.
    const server = await new Promise<Server>((resolve) => {
      const s = createFullApi(ctx, () => true).listen(0, '127.0.0.1', () => resolve(s));
    });
    env.onCleanup(() => void server.close());
    const port = (server.address() as AddressInfo).port;
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const get = (id: string) =>
      new Promise<number>((resolve, reject) => {
        const req = request(
          {
            host: '127.0.0.1',
            port,
            path: `/v1/runs/${id}`,
            agent,
            headers: { authorization: `Bearer ${PRODUCER_TOKEN}` },
          },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          },
        );
        req.on('error', reject);
        req.end();
      });
    const idOf = (g: number) => `r_${g.toString(16).padStart(24, '0')}`;
    for (let i = 0; i < 50; i++) await get(idOf(1 + Math.floor(Math.random() * cloned))); // warm up
    const latencies: number[] = [];
    const statuses: Record<string, number> = {};
    for (let i = 0; i < reads; i++) {
      const t = performance.now();
      const status = await get(idOf(1 + Math.floor(Math.random() * cloned)));
      latencies.push(performance.now() - t);
      statuses[status] = (statuses[status] ?? 0) + 1;
    }
    agent.destroy();
    const d = dist(latencies);
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
        note: `${cloned} cloned in ${round(fillSeconds)} s`,
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
    ];
    return { name: 'archive', title: archive.title, metrics, details: { statuses, read: d, fillSeconds, cloned } };
  },
};
