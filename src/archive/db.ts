/**
 * The archive's PostgreSQL (ARCHIVE_URL) through `pg`: a pool whose idle-connection errors (a restarted server) are
 * logged, not thrown, and the schema migrated at open (src/archive/migrate.ts). The rows' reads and writes are here,
 * one function per statement.
 */
import pg from 'pg';
import type { Logger } from 'pino';
import { migrate } from './migrate.js';
import type { RunArchive } from '../runs/engineContext.js';

export type ArchivePool = pg.Pool;

export async function openArchive(url: string, log?: Logger, max = 4): Promise<ArchivePool> {
  const pool = new pg.Pool({ connectionString: url, max, connectionTimeoutMillis: 5000 });
  // An idle client's connection dropped (server restart): the pool replaces it; nothing was in flight.
  pool.on('error', (err) => log?.warn({ code: 'archive_connection_lost', err }, 'archive connection lost'));
  await migrate(pool);
  return pool;
}

/** One archived run: the columns of archived_runs. */
export interface ArchivedRun {
  runId: string;
  tenant: string;
  agent: string;
  subjectKey: string;
  status: string;
  reason: string;
  createdAtMs: number;
  endedAtMs: number;
  erasedAtMs: number;
  previousRunId?: string | undefined;
  nextRunId?: string | undefined;
  parentRunId?: string | undefined;
  childRunIds: string[];
  view: Record<string, unknown>;
  spec: Record<string, unknown> | undefined;
  events: { id: string; type: string; data: string }[];
  budget: Record<string, unknown>;
  record: Record<string, unknown>;
  searchFields: Record<string, unknown>;
}

const COLUMNS = [
  'run_id',
  'tenant',
  'agent',
  'subject_key',
  'status',
  'reason',
  'created_at_ms',
  'ended_at_ms',
  'erased_at_ms',
  'previous_run_id',
  'next_run_id',
  'parent_run_id',
  'child_run_ids',
  'view',
  'spec',
  'events',
  'budget',
  'record',
  'search_fields',
];

/**
 * Writes a run's row once per version: a run's first archive inserts it; the same copy again (an archiver killed
 * after the commit, before Redis was marked) changes nothing; a later end of the run (a retry that ended again) or a
 * later erasure replaces it. Answers whether the row was written.
 */
export async function upsertArchivedRun(pool: ArchivePool, r: ArchivedRun): Promise<boolean> {
  const values = [
    r.runId,
    r.tenant,
    r.agent,
    r.subjectKey,
    r.status,
    r.reason,
    r.createdAtMs,
    r.endedAtMs,
    r.erasedAtMs,
    r.previousRunId ?? null,
    r.nextRunId ?? null,
    r.parentRunId ?? null,
    JSON.stringify(r.childRunIds),
    JSON.stringify(r.view),
    r.spec === undefined ? null : JSON.stringify(r.spec),
    JSON.stringify(r.events),
    JSON.stringify(r.budget),
    JSON.stringify(r.record),
    JSON.stringify(r.searchFields),
  ];
  const placeholders = COLUMNS.map((_, i) => `$${i + 1}`).join(', ');
  const updates = COLUMNS.slice(1)
    .map((c) => `${c} = EXCLUDED.${c}`)
    .join(', ');
  const res = await pool.query(
    `INSERT INTO archived_runs (${COLUMNS.join(', ')}) VALUES (${placeholders})
     ON CONFLICT (run_id) DO UPDATE SET ${updates}, archived_at = now(), versions = archived_runs.versions + 1
     WHERE (archived_runs.ended_at_ms, archived_runs.erased_at_ms) < (EXCLUDED.ended_at_ms, EXCLUDED.erased_at_ms)`,
    values,
  );
  return (res.rowCount ?? 0) > 0;
}

/** The run view as archived, or undefined. */
export async function archivedView(pool: ArchivePool, runId: string): Promise<Record<string, unknown> | undefined> {
  const res = await pool.query<{ view: Record<string, unknown> }>('SELECT view FROM archived_runs WHERE run_id = $1', [
    runId,
  ]);
  return res.rows[0]?.view;
}

/** The archived run's tenant, or undefined. */
export async function archivedTenant(pool: ArchivePool, runId: string): Promise<string | undefined> {
  const res = await pool.query<{ tenant: string }>('SELECT tenant FROM archived_runs WHERE run_id = $1', [runId]);
  return res.rows[0]?.tenant;
}

/** The run readers' access to the archive (EngineContext.archive). */
export function runArchive(pool: ArchivePool): RunArchive {
  return { pool, view: (runId) => archivedView(pool, runId), tenantOf: (runId) => archivedTenant(pool, runId) };
}

/** Run ids archived for a tenant's subject (every agent). */
export async function archivedRunsOfSubject(pool: ArchivePool, tenant: string, subjectKey: string): Promise<string[]> {
  const res = await pool.query<{ run_id: string }>(
    'SELECT run_id FROM archived_runs WHERE tenant = $1 AND subject_key = $2',
    [tenant, subjectKey],
  );
  return res.rows.map((r) => r.run_id);
}

/**
 * Run ids archived for a tenant whose stored search field `name` equals `value`. Matched by reading the rows'
 * search_fields (no index on them yet): a scan of the tenant's rows.
 */
export async function archivedRunsByField(
  pool: ArchivePool,
  tenant: string,
  name: string,
  value: string,
): Promise<string[]> {
  const res = await pool.query<{ run_id: string }>(
    'SELECT run_id FROM archived_runs WHERE tenant = $1 AND search_fields ->> $2 = $3',
    [tenant, name, value],
  );
  return res.rows.map((r) => r.run_id);
}

/** Deletes rows of runs that ended before `beforeMs`, at most `limit` a call; answers how many. */
export async function deleteArchivedBefore(pool: ArchivePool, beforeMs: number, limit = 1000): Promise<number> {
  const res = await pool.query(
    'DELETE FROM archived_runs WHERE run_id IN (SELECT run_id FROM archived_runs WHERE ended_at_ms < $1 LIMIT $2)',
    [beforeMs, limit],
  );
  return res.rowCount ?? 0;
}
