/**
 * Runs found by what people know of them: their subject key and the agent's search fields (Agent.search), from
 * indexes createRun writes in the same atomic change as the run (includes/searchIndex.lua): never a scan.
 *
 * Each term (a subject key, or a field name and value) has one sorted set per shard, run id -> ms of the run's
 * creation, under the run's tenant and under SEARCH_ANY_TENANT (the index an unscoped reader reads); its name holds a
 * digest of the term, never the term (KeySpace.searchIndex). A search reads the first term's index on every shard
 * (one ZRANGE per shard, in parallel) merged newest first with the listing's merge (src/runs/list.ts), and checks
 * each further term on the run's own shard (ZSCORE of its any-tenant index): an intersection that reads only runs of
 * the first term.
 */
import type { RedisClient } from '../store/connect.js';
import { SEARCH_ANY_TENANT, SEARCH_SUBJECT, type KeySpace } from '../store/keys.js';
import type { RunSpec } from './spec.js';
import {
  IndexSource,
  mergeArchivedPage,
  pageFrom,
  rowOf,
  type ArchivedPage,
  type RunCursor,
  type RunPage,
} from './list.js';

/** A search term: the subject key (`field` SEARCH_SUBJECT) or one of the agent's search fields. */
export interface SearchTerm {
  field: string;
  value: string;
}

export interface SearchQuery {
  /** Every term must match (at least one). */
  terms: readonly SearchTerm[];
  /** Only these tenants' runs; undefined = every tenant. */
  tenants?: readonly string[];
  agent?: string;
  /** Only runs in this status now (a filter on each run read). */
  status?: string;
  cursor?: RunCursor;
  limit: number;
}

/** The terms a run is found by: its subject key and its search fields. */
export function searchTermsOf(spec: Pick<RunSpec, 'key' | 'search'>): SearchTerm[] {
  return [
    { field: SEARCH_SUBJECT, value: spec.key },
    ...Object.entries(spec.search ?? {}).map(([field, value]) => ({ field, value })),
  ];
}

/** The index keys createRun adds the run to: each term under the run's tenant and under any tenant, on its shard. */
export function searchIndexKeysOf(
  keys: KeySpace,
  spec: Pick<RunSpec, 'runId' | 'tenant' | 'key' | 'search'>,
): string[] {
  const shard = keys.shardOf(spec.runId);
  return searchTermsOf(spec).flatMap((t) => [
    keys.searchIndex(shard, spec.tenant, t.field, t.value),
    keys.searchIndex(shard, SEARCH_ANY_TENANT, t.field, t.value),
  ]);
}

export async function searchRuns(redis: RedisClient, keys: KeySpace, q: SearchQuery): Promise<RunPage> {
  const [first, ...rest] = q.terms;
  if (!first || (q.tenants !== undefined && q.tenants.length === 0)) return { runs: [] };
  const tenants = q.tenants ?? [SEARCH_ANY_TENANT];
  const sources = keys
    .allShards()
    .flatMap((shard) =>
      tenants.map(
        (t) => new IndexSource(shard, keys.searchIndex(shard, t, first.field, first.value), q.cursor, q.limit + 1),
      ),
    );
  return pageFrom(redis, keys, sources, q.limit, async (runId, _at, run) => {
    // A scoped reader gets its tenants' runs whatever index named them: one named like SEARCH_ANY_TENANT holds all.
    if (q.tenants !== undefined && !q.tenants.includes(run.tenant)) return undefined;
    if (q.agent !== undefined && run.agent !== q.agent) return undefined;
    if (q.status !== undefined && run.status !== q.status) return undefined;
    if (!(await matchesAll(redis, keys, runId, rest))) return undefined;
    // Ordered by creation; `statusAt` is the run's last change.
    return rowOf(runId, run, run.updatedAt);
  });
}

/** Whether the run is in every term's index (its own shard's any-tenant index: one pipeline, one slot). */
async function matchesAll(redis: RedisClient, keys: KeySpace, runId: string, terms: readonly SearchTerm[]) {
  if (terms.length === 0) return true;
  const shard = keys.shardOf(runId);
  const pipe = redis.pipeline();
  for (const t of terms) pipe.zscore(keys.searchIndex(shard, SEARCH_ANY_TENANT, t.field, t.value), runId);
  const res = (await pipe.exec()) ?? [];
  return res.every(([err, score]) => {
    if (err) throw err;
    return score !== null;
  });
}

/**
 * Every run id a term's index holds for one tenant, on every shard (one ZRANGE per shard): the runs an erasure of
 * that subject or search value must reach (src/archive/erasure.ts). An index holds a customer's runs only, so it is
 * read whole.
 */
export async function indexedRunIds(
  redis: RedisClient,
  keys: KeySpace,
  tenant: string,
  term: SearchTerm,
): Promise<string[]> {
  const perShard = await Promise.all(
    keys.allShards().map((shard) => redis.zrange(keys.searchIndex(shard, tenant, term.field, term.value), 0, -1)),
  );
  return perShard.flat();
}

/**
 * A search over every run that still exists: Redis' indexes and, with an archive, its matches past Redis' retention,
 * merged (mergeArchivedPage, by creation). What the API's search and the console's chain of a subject both read.
 */
export async function searchEverywhere(
  ctx: { redis: RedisClient; keys: KeySpace; archive?: { search(q: SearchQuery): Promise<ArchivedPage> } },
  q: SearchQuery,
): Promise<RunPage> {
  const [hot, archived] = await Promise.all([searchRuns(ctx.redis, ctx.keys, q), ctx.archive?.search(q)]);
  return archived ? mergeArchivedPage(hot, archived, q.limit, 'createdAt') : hot;
}
