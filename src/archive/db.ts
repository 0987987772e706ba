/**
 * The archive's PostgreSQL (ARCHIVE_URL) through `pg`: a pool whose idle-connection errors (a restarted server) are
 * logged, not thrown, and the schema migrated at open (src/archive/migrate.ts). The rows' reads and writes are here,
 * one function per statement. Every customer string written goes through src/archive/pgText.ts (PostgreSQL holds no
 * NUL character) and is read back through it: what the archive serves is what Redis served.
 */
import pg from 'pg';
import type { Logger } from 'pino';
import { migrate } from './migrate.js';
import type { ArchivedTreeNode, ArchivedRunDetails, RunArchive } from '../runs/engineContext.js';
import type { SearchQuery } from '../runs/search.js';
import type { ArchivedPage, RunQuery, RunRow } from '../runs/list.js';
import type { RunStatus } from '../core/status.js';
import { SEARCH_SUBJECT } from '../store/keys.js';
import { archiveJson, archiveText, fromArchiveJson, fromArchiveText } from './pgText.js';

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
  /** Changes to the run since its end (the run hash's `revision`): the row's version after its end and erasure. */
  revision: number;
  previousRunId?: string | undefined;
  nextRunId?: string | undefined;
  parentRunId?: string | undefined;
  childRunIds: string[];
  view: Record<string, unknown>;
  spec: Record<string, unknown> | undefined;
  events: { id: string; type: string; data: string }[];
  budget: Record<string, unknown>;
  record: Record<string, unknown>;
  /** The agent's search fields of the run (Agent.search), as Redis indexes it. */
  searchFields: Record<string, string>;
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
  'revision',
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
 * Writes a run's row once per version, (end, erasure, revision) in that order: a run's first archive inserts it; the
 * same copy again (an archiver killed after the commit, before Redis was marked) changes nothing, nor does an older
 * copy (one read before a change the row already has); a later end of the run (a retry that ended again), a later
 * erasure or a change after its end (an action settled by a person's finding) replaces it. Answers whether the row was
 * written.
 */
export async function upsertArchivedRun(pool: ArchivePool, r: ArchivedRun): Promise<boolean> {
  const values = [
    r.runId,
    r.tenant,
    r.agent,
    archiveText(r.subjectKey),
    r.status,
    r.reason,
    r.createdAtMs,
    r.endedAtMs,
    r.erasedAtMs,
    r.revision,
    r.previousRunId ?? null,
    r.nextRunId ?? null,
    r.parentRunId ?? null,
    JSON.stringify(r.childRunIds),
    archiveJson(r.view),
    r.spec === undefined ? null : archiveJson(r.spec),
    archiveJson(r.events),
    archiveJson(r.budget),
    archiveJson(r.record),
    archiveJson(r.searchFields),
  ];
  const placeholders = COLUMNS.map((_, i) => `$${i + 1}`).join(', ');
  const updates = COLUMNS.slice(1)
    .map((c) => `${c} = EXCLUDED.${c}`)
    .join(', ');
  const res = await pool.query(
    `INSERT INTO archived_runs (${COLUMNS.join(', ')}) VALUES (${placeholders})
     ON CONFLICT (run_id) DO UPDATE SET ${updates}, archived_at = now(), versions = archived_runs.versions + 1
     WHERE (archived_runs.ended_at_ms, archived_runs.erased_at_ms, archived_runs.revision)
       < (EXCLUDED.ended_at_ms, EXCLUDED.erased_at_ms, EXCLUDED.revision)`,
    values,
  );
  return (res.rowCount ?? 0) > 0;
}

/** The run view as archived, or undefined. */
export async function archivedView(pool: ArchivePool, runId: string): Promise<Record<string, unknown> | undefined> {
  const res = await pool.query<{ view: Record<string, unknown> }>('SELECT view FROM archived_runs WHERE run_id = $1', [
    runId,
  ]);
  const view = res.rows[0]?.view;
  return view && fromArchiveJson(view);
}

/** The archived run's tenant, or undefined. */
export async function archivedTenant(pool: ArchivePool, runId: string): Promise<string | undefined> {
  const res = await pool.query<{ tenant: string }>('SELECT tenant FROM archived_runs WHERE run_id = $1', [runId]);
  return res.rows[0]?.tenant;
}

/** The run readers' access to the archive (EngineContext.archive). */
export function runArchive(pool: ArchivePool): RunArchive {
  return {
    pool,
    view: (runId) => archivedView(pool, runId),
    tenantOf: (runId) => archivedTenant(pool, runId),
    search: (q) => searchArchivedRuns(pool, q),
    list: (q) => listArchivedRuns(pool, q),
    details: (runId) => archivedDetails(pool, runId),
    treeNodes: (runIds) => archivedTreeNodes(pool, runIds),
  };
}

/** The archived run's agent, input and events (RunArchive.details), or undefined. */
export async function archivedDetails(pool: ArchivePool, runId: string): Promise<ArchivedRunDetails | undefined> {
  const res = await pool.query<{ agent: string; input: unknown; events: ArchivedRunDetails['events'] }>(
    "SELECT agent, spec -> 'input' AS input, events FROM archived_runs WHERE run_id = $1",
    [runId],
  );
  const row = res.rows[0];
  return row
    ? { agent: row.agent, input: fromArchiveJson(row.input) ?? undefined, events: fromArchiveJson(row.events) }
    : undefined;
}

/** The status and child run ids of those of `runIds` the archive holds (RunArchive.treeNodes). */
export async function archivedTreeNodes(
  pool: ArchivePool,
  runIds: readonly string[],
): Promise<Map<string, ArchivedTreeNode>> {
  if (runIds.length === 0) return new Map();
  const res = await pool.query<{ run_id: string; status: RunStatus; child_run_ids: string[] }>(
    'SELECT run_id, status, child_run_ids FROM archived_runs WHERE run_id = ANY($1::text[])',
    [runIds],
  );
  return new Map(res.rows.map((r) => [r.run_id, { status: r.status, childRunIds: r.child_run_ids }]));
}

/**
 * The child run ids (child_run_ids: the runs their agent tools started) of those of `runIds` the archive holds for
 * `tenant`, each once.
 */
export async function archivedChildRunIds(
  pool: ArchivePool,
  tenant: string,
  runIds: readonly string[],
): Promise<string[]> {
  if (runIds.length === 0) return [];
  const res = await pool.query<{ child: string }>(
    `SELECT DISTINCT c AS child FROM archived_runs, jsonb_array_elements_text(child_run_ids) AS c
     WHERE tenant = $1 AND run_id = ANY($2::text[])`,
    [tenant, runIds],
  );
  return res.rows.map((r) => r.child);
}

/**
 * The follow-ups the archive knows of those of `runIds` it holds, of a tenant: each row's next_run_id, and the rows
 * whose previous_run_id names one of them (a run copied before its follow-up was created was copied without the
 * link). A follow-up has its previous run's tenant and subject key: the second read is the (tenant, subject_key)
 * index's.
 */
export async function archivedFollowUps(
  pool: ArchivePool,
  tenant: string,
  runIds: readonly string[],
): Promise<string[]> {
  if (runIds.length === 0) return [];
  const res = await pool.query<{ run_id: string }>(
    `SELECT next_run_id AS run_id FROM archived_runs
     WHERE tenant = $1 AND run_id = ANY($2::text[]) AND next_run_id IS NOT NULL
     UNION
     SELECT f.run_id FROM archived_runs p
       JOIN archived_runs f ON f.tenant = p.tenant AND f.subject_key = p.subject_key AND f.previous_run_id = p.run_id
     WHERE p.tenant = $1 AND p.run_id = ANY($2::text[])`,
    [archiveText(tenant), runIds],
  );
  return res.rows.map((r) => r.run_id);
}

/** The subject keys of those of `runIds` the archive holds, of a tenant. */
export async function archivedSubjectKeys(
  pool: ArchivePool,
  tenant: string,
  runIds: readonly string[],
): Promise<string[]> {
  if (runIds.length === 0) return [];
  const res = await pool.query<{ subject_key: string }>(
    'SELECT DISTINCT subject_key FROM archived_runs WHERE tenant = $1 AND run_id = ANY($2::text[])',
    [archiveText(tenant), runIds],
  );
  return res.rows.map((r) => fromArchiveText(r.subject_key));
}

/** What an erasure reads of an archived run to name the event keys its waits used: tenant, agent, input, transcript. */
export async function archivedWaitSources(
  pool: ArchivePool,
  runId: string,
): Promise<{ tenant: string; agent: string; input: unknown; transcript: unknown } | undefined> {
  const res = await pool.query<{ tenant: string; agent: string; input: unknown; transcript: unknown }>(
    "SELECT tenant, agent, spec -> 'input' AS input, view -> 'transcript' AS transcript FROM archived_runs WHERE run_id = $1",
    [runId],
  );
  return res.rows[0];
}

/** Run ids archived for a tenant's subject (every agent). */
export async function archivedRunsOfSubject(pool: ArchivePool, tenant: string, subjectKey: string): Promise<string[]> {
  const res = await pool.query<{ run_id: string }>(
    'SELECT run_id FROM archived_runs WHERE tenant = $1 AND subject_key = $2',
    [archiveText(tenant), archiveText(subjectKey)],
  );
  return res.rows.map((r) => r.run_id);
}

/**
 * Run ids archived for a tenant whose agent's search field `name` equals `value` (the containment the GIN index of
 * search_fields answers, migrations/002_search_fields.sql).
 */
export async function archivedRunsByField(
  pool: ArchivePool,
  tenant: string,
  name: string,
  value: string,
): Promise<string[]> {
  const res = await pool.query<{ run_id: string }>(
    'SELECT run_id FROM archived_runs WHERE tenant = $1 AND search_fields @> $2::jsonb',
    [archiveText(tenant), archiveJson({ [name]: value })],
  );
  return res.rows.map((r) => r.run_id);
}

/**
 * The archived runs a search finds (RunArchive.search): every term matched (the subject on subject_key, the agent's
 * search fields by containment in search_fields), newest created first after the cursor, `limit` of them. Indexed:
 * (tenant, subject_key) or (subject_key) for a subject, the GIN index of search_fields for fields.
 */
export async function searchArchivedRuns(pool: ArchivePool, q: SearchQuery): Promise<ArchivedPage> {
  if (q.terms.length === 0 || (q.tenants !== undefined && q.tenants.length === 0)) return { runs: [], more: false };
  const where: string[] = [];
  const params: unknown[] = [];
  const param = (v: unknown) => `$${params.push(v)}`;
  const subject = q.terms.find((t) => t.field === SEARCH_SUBJECT);
  // Two different subjects never match one run.
  if (q.terms.some((t) => t.field === SEARCH_SUBJECT && t.value !== subject?.value)) return { runs: [], more: false };
  const fields = q.terms.filter((t) => t.field !== SEARCH_SUBJECT);
  const wanted: Record<string, string> = {};
  for (const t of fields) {
    if (wanted[t.field] !== undefined && wanted[t.field] !== t.value) return { runs: [], more: false };
    wanted[t.field] = t.value;
  }
  if (q.tenants !== undefined) where.push(`tenant = ANY(${param(q.tenants)}::text[])`);
  if (subject) where.push(`subject_key = ${param(archiveText(subject.value))}`);
  if (fields.length > 0) where.push(`search_fields @> ${param(archiveJson(wanted))}::jsonb`);
  if (q.agent !== undefined) where.push(`agent = ${param(q.agent)}`);
  if (q.status !== undefined) where.push(`status = ${param(q.status)}`);
  if (q.cursor) where.push(`(created_at_ms, run_id) < (${param(q.cursor.at)}::bigint, ${param(q.cursor.runId)})`);
  return archivedPage(pool, where, params, 'created_at_ms', q.limit);
}

/**
 * The archived runs a listing finds (RunArchive.list): in one of the statuses, the tenants and agent given, ended in
 * [since, until), newest end first after the cursor (the listing's order: an archived run's last status change is its
 * end), `limit` of them. Indexed by (ended_at_ms) and, for a tenant's, (tenant, ended_at_ms).
 */
export async function listArchivedRuns(pool: ArchivePool, q: RunQuery): Promise<ArchivedPage> {
  if (q.statuses.length === 0 || (q.tenants !== undefined && q.tenants.length === 0)) return { runs: [], more: false };
  const where: string[] = [];
  const params: unknown[] = [];
  const param = (v: unknown) => `$${params.push(v)}`;
  where.push(`status = ANY(${param(q.statuses)}::text[])`);
  if (q.tenants !== undefined) where.push(`tenant = ANY(${param(q.tenants)}::text[])`);
  if (q.agent !== undefined) where.push(`agent = ${param(q.agent)}`);
  if (q.since !== undefined) where.push(`ended_at_ms >= ${param(q.since)}::bigint`);
  if (q.until !== undefined) where.push(`ended_at_ms < ${param(q.until)}::bigint`);
  if (q.cursor) where.push(`(ended_at_ms, run_id) < (${param(q.cursor.at)}::bigint, ${param(q.cursor.runId)})`);
  return archivedPage(pool, where, params, 'ended_at_ms', q.limit);
}

/** One page of archived runs as listing rows: those matching `where`, newest `order` first (run id desc on a tie). */
async function archivedPage(
  pool: ArchivePool,
  where: string[],
  params: unknown[],
  order: 'created_at_ms' | 'ended_at_ms',
  limit: number,
): Promise<ArchivedPage> {
  params.push(limit + 1);
  const res = await pool.query<{
    run_id: string;
    tenant: string;
    agent: string;
    subject_key: string;
    status: string;
    reason: string;
    created_at_ms: string;
    ended_at_ms: string;
    search_fields: Record<string, unknown>;
    step: string | null;
    cost: string | null;
  }>(
    `SELECT run_id, tenant, agent, subject_key, status, reason, created_at_ms, ended_at_ms, search_fields,
       record ->> 'cursor' AS step, budget ->> 'costUsed' AS cost
     FROM archived_runs WHERE ${where.join(' AND ')}
     ORDER BY ${order} DESC, run_id DESC LIMIT $${params.length}`,
    params,
  );
  const runs: RunRow[] = res.rows.slice(0, limit).map((r) => {
    const search = Object.fromEntries(
      Object.entries(fromArchiveJson(r.search_fields)).filter((e): e is [string, string] => typeof e[1] === 'string'),
    );
    return {
      runId: r.run_id,
      status: r.status as RunStatus,
      reason: r.reason,
      tenant: r.tenant,
      agent: r.agent,
      step: Number(r.step ?? 0),
      createdAt: Number(r.created_at_ms),
      // An archived run has ended: its last change is its end.
      statusAt: Number(r.ended_at_ms),
      subject: fromArchiveText(r.subject_key),
      ...(Object.keys(search).length > 0 ? { search } : {}),
      cost: Number(r.cost ?? 0),
    };
  });
  return { runs, more: res.rows.length > limit };
}

/** Deletes rows of runs that ended before `beforeMs`, at most `limit` a call; answers how many. */
export async function deleteArchivedBefore(pool: ArchivePool, beforeMs: number, limit = 1000): Promise<number> {
  const res = await pool.query(
    'DELETE FROM archived_runs WHERE run_id IN (SELECT run_id FROM archived_runs WHERE ended_at_ms < $1 LIMIT $2)',
    [beforeMs, limit],
  );
  return res.rowCount ?? 0;
}
