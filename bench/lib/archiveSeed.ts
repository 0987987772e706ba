/**
 * Filling the archive for the read bench: rows `from`..`to` of `total` built from real archived runs, written by PostgreSQL itself
 * (INSERT ... SELECT over generate_series, in batches on two connections), never row by row from Node.
 *
 * Each seeded row takes its JSON columns (view, spec, events, budget, record, child ids, status, reason) as they are
 * from one of the templates (real rows the archiver wrote, taken in turn), so the rows have the real runs' shapes and
 * sizes, TOAST included. What a reader selects by varies per row: a random-looking run id (`seededRunId`, md5 of the
 * row number), the tenant (one of four), the subject (two runs per ticket, rows 2k-1 and 2k, the second a follow-up linked both ways),
 * the stored search fields' `id` (the ticket), the creation and end times (row g of `total` at g/total of the last 30 days, each
 * row keeping its template's duration) and the archive time. The JSON bodies keep their template's ids: a seeded
 * row's view names its template's run.
 *
 * The table's indexes (its primary key included) are dropped for the load and built again afterwards from the
 * definitions read before the drop, then compared with them: the reads see the indexes the migration made. VACUUM
 * ANALYZE afterwards leaves the table as autovacuum would, and keeps autovacuum from starting during the reads.
 */
import { createHash } from 'node:crypto';
import pg from 'pg';

const TENANTS = 4;
const SPREAD_MS = 30 * 24 * 3600_000;
const BATCH = 25_000;
const LOADERS = 2;

/** The run id of seeded row `g` (1-based): the same md5 the INSERT computes. */
export function seededRunId(g: number): string {
  return `r_${createHash('md5').update(`seed${g}`).digest('hex').slice(0, 24)}`;
}

/** The subject key of seeded row `g`, and its tenant. */
export function seededSubject(g: number): { tenant: string; subjectKey: string } {
  const ticket = Math.floor((g - 1) / 2);
  return { tenant: `tenant-${ticket % TENANTS}`, subjectKey: `T-${ticket}` };
}

export interface SeedReport {
  seeded: number;
  loadSeconds: number;
  indexSeconds: number;
  vacuumSeconds: number;
  indexes: string[];
}

const ID = (g: string) => `'r_' || substr(md5('seed' || ${g}), 1, 24)`;

export async function seedArchive(
  url: string,
  templateIds: readonly string[],
  rows: { from: number; to: number; total: number },
): Promise<SeedReport> {
  const n = rows.total;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query('DROP TABLE IF EXISTS bench_seed_templates');
    await admin.query(
      `CREATE UNLOGGED TABLE bench_seed_templates AS
         SELECT (row_number() OVER (ORDER BY run_id) - 1)::int AS n, * FROM archived_runs WHERE run_id = ANY($1)`,
      [templateIds],
    );
    const templates = templateIds.length;
    const pkey = (
      await admin.query<{ name: string; def: string }>(
        `SELECT conname AS name, pg_get_constraintdef(oid) AS def FROM pg_constraint
         WHERE conrelid = 'archived_runs'::regclass AND contype = 'p'`,
      )
    ).rows[0]!;
    const indexDefs = async () =>
      (
        await admin.query<{ indexname: string; indexdef: string }>(
          "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'archived_runs' ORDER BY indexname",
        )
      ).rows;
    const before = await indexDefs();
    for (const ix of before) if (ix.indexname !== pkey.name) await admin.query(`DROP INDEX ${ix.indexname}`);
    await admin.query(`ALTER TABLE archived_runs DROP CONSTRAINT ${pkey.name}`);

    const nowMs = Date.now();
    const t0 = performance.now();
    let next = rows.from;
    const load = async () => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        while (next <= rows.to) {
          const lo = next;
          const hi = Math.min(lo + BATCH - 1, rows.to);
          next = hi + 1;
          await c.query(
            `INSERT INTO archived_runs
               SELECT ${ID('g')}, 'tenant-' || (((g - 1) / 2) % ${TENANTS}), t.agent, 'T-' || ((g - 1) / 2), t.status, t.reason,
                      s.created, s.created + (t.ended_at_ms - t.created_at_ms), 0,
                      to_timestamp((s.created + (t.ended_at_ms - t.created_at_ms) + 1000) / 1000.0),
                      CASE WHEN g % 2 = 0 THEN ${ID('(g - 1)')} END, CASE WHEN g % 2 = 1 AND g < $5 THEN ${ID('(g + 1)')} END,
                      NULL, t.child_run_ids, t.view, t.spec, t.events, t.budget, t.record,
                      t.search_fields || jsonb_build_object('ticket', 'T-' || ((g - 1) / 2)), 1
               FROM generate_series($1::bigint, $2::bigint) g
               CROSS JOIN LATERAL (SELECT $3::bigint - $4::bigint + (g * $4::bigint) / $5::bigint AS created) s
               JOIN bench_seed_templates t ON t.n = g % ${templates}`,
            [lo, hi, nowMs, SPREAD_MS, n],
          );
        }
      } finally {
        await c.end();
      }
    };
    await Promise.all(Array.from({ length: LOADERS }, load));
    const loadSeconds = (performance.now() - t0) / 1000;

    const t1 = performance.now();
    await admin.query(`ALTER TABLE archived_runs ADD CONSTRAINT ${pkey.name} ${pkey.def}`);
    for (const ix of before) if (ix.indexname !== pkey.name) await admin.query(ix.indexdef);
    const after = await indexDefs();
    if (JSON.stringify(after) !== JSON.stringify(before))
      throw new Error(`archive indexes differ after the seed: ${JSON.stringify({ before, after })}`);
    const indexSeconds = (performance.now() - t1) / 1000;

    const t2 = performance.now();
    await admin.query('DROP TABLE bench_seed_templates');
    await admin.query('VACUUM ANALYZE archived_runs');
    const vacuumSeconds = (performance.now() - t2) / 1000;
    return {
      seeded: rows.to - rows.from + 1,
      loadSeconds,
      indexSeconds,
      vacuumSeconds,
      indexes: after.map((i) => i.indexdef),
    };
  } finally {
    await admin.end();
  }
}
