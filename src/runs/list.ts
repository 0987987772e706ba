/**
 * Runs listed and filtered by status, tenant, agent and the time of their last
 * status change, newest status change first, from the per-shard indexes the status-changing scripts keep
 * (src/store/lua/includes/runIndex.lua): never a SCAN.
 *
 * Which sorted sets are read: one per (shard, status) of the most specific
 * index the filters allow (tenant+status, else agent+status, else status); a
 * tenant-scoped reader reads its tenants' sets only. They are merged in the
 * order (time desc, run id desc), Redis' own REV order, so a cursor (the last
 * row's time and id) continues exactly after it, across shards and statuses.
 * Filters the chosen index does not cover (agent, when a tenant is also given)
 * are checked on each run's hash.
 *
 * A run that changes status while someone pages moves to the top of its new
 * status: like any live list, it may be seen twice or not at all in that walk.
 * An entry whose run has expired is dropped from its index when met.
 */
import type { RedisClient } from '../store/connect.js';
import type { KeySpace } from '../store/keys.js';
import type { RunStatus } from '../core/status.js';
import { readBudget, readRun } from '../store/runRecord.js';

export interface RunQuery {
  /** Statuses to list (the caller passes every status when unfiltered). */
  statuses: readonly string[];
  /** Only these tenants' runs; undefined = every tenant. */
  tenants?: readonly string[];
  agent?: string;
  cursor?: RunCursor;
  /**
   * Only runs whose last status change is in [since, until) (ms): the time the indexes
   * are scored by, so the range is part of each ZRANGE, never a filter after the read.
   */
  since?: number;
  until?: number;
  limit: number;
}

export interface RunCursor {
  at: number;
  runId: string;
}

export interface RunRow {
  runId: string;
  status: RunStatus;
  reason: string;
  tenant: string;
  agent: string;
  step: number;
  createdAt: number;
  /** When the run entered its status (ms): the list's order. */
  statusAt: number;
  /** The run's subject key (the agent's key(input)): the subject's runs form a chain. */
  subject: string;
  /** The agent's search fields of the run's input (absent when it declares none). */
  search?: Record<string, string>;
  /** What the run's model attempts have cost so far, in µ$ (1e-6 USD; 0 when nothing priced was spent). */
  cost: number;
}

export interface RunPage {
  runs: RunRow[];
  nextCursor?: string;
}

/** A page of the archive's runs (RunArchive.search, RunArchive.list): in the query's order, after its cursor. */
export interface ArchivedPage {
  runs: RunRow[];
  /** Whether the archive holds more matches after the last one returned. */
  more: boolean;
}

/** What a page is ordered by: a search by the runs' creation, the listing by their last status change. */
export type PageOrder = 'createdAt' | 'statusAt';

/**
 * One page over Redis and the archive: the two pages merged newest first by `by` (run id desc on a tie), a run in both
 * once (Redis' row: the run as it is now), and none of `held` from the archive (runs Redis still holds, which its own
 * page lists where they stand now). A source with more after its page bounds the merged page at its last entry, so
 * the next page (its cursor: the last row's `by` and id) misses nothing of either. Redis' indexes are scored by the
 * same times (the search's by the run's creation, the listing's by its last status change; an archived run's last
 * change is its end), so both sources page by one key.
 */
export function mergeArchivedPage(
  redis: RunPage,
  archived: ArchivedPage,
  limit: number,
  by: PageOrder,
  held: ReadonlySet<string> = new Set(),
): RunPage {
  const seen = new Set(redis.runs.map((r) => r.runId));
  const after = (a: RunCursor, row: RunRow) => row[by] < a.at || (row[by] === a.at && row.runId < a.runId);
  const bounds: RunCursor[] = [];
  const redisBound = redis.nextCursor !== undefined ? decodeCursor(redis.nextCursor) : undefined;
  if (redisBound) bounds.push(redisBound);
  const lastArchived = archived.runs.at(-1);
  if (archived.more && lastArchived) bounds.push({ at: lastArchived[by], runId: lastArchived.runId });
  const merged = [...redis.runs, ...archived.runs.filter((r) => !seen.has(r.runId) && !held.has(r.runId))]
    .sort((a, b) => b[by] - a[by] || (a.runId < b.runId ? 1 : a.runId > b.runId ? -1 : 0))
    .filter((row) => bounds.every((b) => !after(b, row)));
  const runs = merged.slice(0, limit);
  const last = runs.at(-1);
  const more = merged.length > limit || bounds.length > 0;
  if (!more) return { runs };
  // A page bounded before any row (Redis examined its bound without a match): continue from that bound.
  const next = last ?? bounds.reduce((a, b) => (a.at > b.at || (a.at === b.at && a.runId > b.runId) ? a : b));
  return { runs, nextCursor: encodeCursor('status' in next ? { at: next[by], runId: next.runId } : next) };
}

/** At most this many index entries are read per page per filtered-out row allowance, so one request stays bounded. */
const EXAMINE_FACTOR = 10;

export function encodeCursor(c: RunCursor): string {
  return Buffer.from(`${c.at}:${c.runId}`).toString('base64url');
}

/** The cursor, or undefined when it is malformed (the caller answers 400). */
export function decodeCursor(raw: string): RunCursor | undefined {
  const m = /^(\d{1,16}):(r_[0-9a-f]{24})$/.exec(Buffer.from(raw, 'base64url').toString('utf8'));
  return m ? { at: Number(m[1]), runId: m[2]! } : undefined;
}

/** One index zset read in (score desc, member desc) order, strictly after the cursor, a batch at a time. */
export class IndexSource {
  private offset = 0;
  private done = false;
  buffer: { runId: string; at: number }[] = [];

  constructor(
    readonly shard: number,
    readonly key: string,
    private readonly after: RunCursor | undefined,
    private readonly batch: number,
    private readonly range: { since?: number | undefined; until?: number | undefined } = {},
  ) {}

  /** ZRANGE ... BYSCORE REV LIMIT arguments of the next batch (`until` exclusive, `since` inclusive). */
  args(): (string | number)[] {
    const { since, until } = this.range;
    let max: string | number = this.after ? this.after.at : '+inf';
    if (until !== undefined && (this.after === undefined || until <= this.after.at)) max = `(${until}`;
    return [this.key, max, since ?? '-inf', 'BYSCORE', 'REV', 'LIMIT', this.offset, this.batch, 'WITHSCORES'];
  }

  take(reply: string[]): void {
    this.offset += reply.length / 2;
    if (reply.length / 2 < this.batch) this.done = true;
    for (let i = 0; i < reply.length; i += 2) {
      const runId = reply[i]!;
      const at = Number(reply[i + 1]);
      // Equal scores come in reverse member order: skip those at or before the cursor's id.
      if (this.after && at === this.after.at && runId >= this.after.runId) continue;
      this.buffer.push({ runId, at });
    }
  }

  get needsMore(): boolean {
    return this.buffer.length === 0 && !this.done;
  }
}

function sourcesOf(keys: KeySpace, q: RunQuery): IndexSource[] {
  const out: IndexSource[] = [];
  const add = (shard: number, key: string) =>
    out.push(new IndexSource(shard, key, q.cursor, q.limit + 1, { since: q.since, until: q.until }));
  for (const shard of keys.allShards()) {
    for (const status of q.statuses) {
      if (q.tenants !== undefined) for (const t of q.tenants) add(shard, keys.runsByTenant(shard, t, status));
      else if (q.agent !== undefined) add(shard, keys.runsByAgent(shard, q.agent, status));
      else add(shard, keys.runsByStatus(shard, status));
    }
  }
  return out;
}

/**
 * Until every source has a head or is exhausted (a batch can be all entries at or before
 * the cursor): one pipeline per shard (one Redis Cluster slot each), the shards in parallel.
 */
async function fill(redis: RedisClient, sources: IndexSource[]): Promise<void> {
  while (sources.some((s) => s.needsMore)) await fillOnce(redis, sources);
}

async function fillOnce(redis: RedisClient, sources: IndexSource[]): Promise<void> {
  const byShard = new Map<number, IndexSource[]>();
  for (const s of sources) if (s.needsMore) byShard.set(s.shard, [...(byShard.get(s.shard) ?? []), s]);
  await Promise.all(
    [...byShard.values()].map(async (group) => {
      const pipe = redis.pipeline();
      for (const s of group) pipe.call('ZRANGE', ...s.args());
      const res = (await pipe.exec()) ?? [];
      res.forEach(([err, reply], i) => {
        if (err) throw err;
        group[i]!.take(reply as string[]);
      });
    }),
  );
}

export async function listRuns(redis: RedisClient, keys: KeySpace, q: RunQuery): Promise<RunPage> {
  if (q.tenants !== undefined && q.tenants.length === 0) return { runs: [] };
  return pageFrom(redis, keys, sourcesOf(keys, q), q.limit, async (runId, at, run) => {
    if (q.agent !== undefined && run.agent !== q.agent) return undefined;
    return rowOf(runId, run, at);
  });
}

/**
 * A listing over every run that still exists: Redis' indexes and, with an archive, the runs it holds that Redis let go
 * (an archived run Redis still holds is listed by Redis, where it stands now), merged by the last status change.
 */
export async function listEverywhere(
  ctx: { redis: RedisClient; keys: KeySpace; archive?: { list(q: RunQuery): Promise<ArchivedPage> } },
  q: RunQuery,
): Promise<RunPage> {
  const [hot, archived] = await Promise.all([listRuns(ctx.redis, ctx.keys, q), ctx.archive?.list(q)]);
  if (!archived) return hot;
  const pipeline = ctx.redis.pipeline();
  for (const r of archived.runs) pipeline.exists(ctx.keys.run(r.runId).run);
  const replies = archived.runs.length > 0 ? ((await pipeline.exec()) ?? []) : [];
  const held = new Set(archived.runs.filter((_, i) => replies[i]?.[1] === 1).map((r) => r.runId));
  return mergeArchivedPage(hot, archived, q.limit, 'statusAt', held);
}

const ROW_FIELDS = ['reason', 'tenant', 'agent', 'cursor', 'createdAt', 'updatedAt', 'key', 'search'] as const;
export type RowRecord = NonNullable<Awaited<ReturnType<typeof readRun<(typeof ROW_FIELDS)[number]>>>>;

/**
 * A listing row of a run as read (`statusAt`: when it entered its status, as the caller knows it); its cost is read
 * with the page (pageFrom), from the budget hash.
 */
export function rowOf(runId: string, run: RowRecord, statusAt: number): Omit<RunRow, 'cost'> {
  return {
    runId,
    status: run.status,
    reason: run.reason,
    tenant: run.tenant,
    agent: run.agent,
    step: run.cursor,
    createdAt: run.createdAt,
    statusAt,
    subject: run.key,
    ...(run.search !== undefined ? { search: parseSearch(run.search) } : {}),
  };
}

function parseSearch(raw: string): Record<string, string> {
  try {
    const v = JSON.parse(raw) as unknown;
    if (typeof v !== 'object' || v === null) return {};
    return Object.fromEntries(Object.entries(v).filter((e): e is [string, string] => typeof e[1] === 'string'));
  } catch {
    return {};
  }
}

/**
 * One page from index sources merged in (time desc, run id desc) order (the listing's and the search's, src/runs/
 * search.ts): each entry's run is read and `accept` makes its row or skips it; an entry whose run has expired is
 * dropped from its index when met.
 */
export async function pageFrom(
  redis: RedisClient,
  keys: KeySpace,
  sources: IndexSource[],
  limit: number,
  accept: (runId: string, at: number, run: RowRecord) => Promise<Omit<RunRow, 'cost'> | undefined>,
): Promise<RunPage> {
  const rows: Omit<RunRow, 'cost'>[] = [];
  let examined = 0;
  let last: RunCursor | undefined;
  const budget = limit * EXAMINE_FACTOR;
  while (rows.length < limit && examined < budget) {
    await fill(redis, sources);
    // The next row overall: the highest (time, id) at the head of any source.
    let best: IndexSource | undefined;
    for (const s of sources) {
      const head = s.buffer[0];
      if (!head) continue;
      const b = best?.buffer[0];
      if (!b || head.at > b.at || (head.at === b.at && head.runId > b.runId)) best = s;
    }
    if (!best) return { runs: await withCost(redis, keys, rows) }; // every source exhausted: no next page
    const { runId, at } = best.buffer.shift()!;
    examined++;
    last = { at, runId };
    const run = await readRun(redis, keys, runId, ROW_FIELDS);
    if (!run) {
      await redis.zrem(best.key, runId); // the run expired (retention): its entry goes too
      continue;
    }
    const row = await accept(runId, at, run);
    if (row) rows.push(row);
  }
  // A full page (or the examine bound): there may be more after the last entry read.
  await fill(redis, sources);
  const more = sources.some((s) => s.buffer.length > 0);
  const runs = await withCost(redis, keys, rows);
  return more && last ? { runs, nextCursor: encodeCursor(last) } : { runs };
}

/** The page's rows with each run's cost (its budget hash's costUsed, one read per row, all at once). */
async function withCost(redis: RedisClient, keys: KeySpace, rows: Omit<RunRow, 'cost'>[]): Promise<RunRow[]> {
  const used = await Promise.all(rows.map((r) => readBudget(redis, keys, r.runId, ['costUsed'])));
  return rows.map((r, i) => ({ ...r, cost: used[i]!.costUsed }));
}

/**
 * Runs per status over every shard (agent_runs_by_status); a terminal status counts only entries younger than the
 * retention.
 */
export async function countRunsByStatus(
  redis: RedisClient,
  keys: KeySpace,
  statuses: readonly string[],
  terminal: ReadonlySet<string>,
  retentionMs: number,
  now: number,
): Promise<Record<string, number>> {
  const out: Record<string, number> = Object.fromEntries(statuses.map((s) => [s, 0]));
  // One pipeline per shard (one Redis Cluster slot each).
  await Promise.all(
    keys.allShards().map(async (shard) => {
      const pipe = redis.pipeline();
      for (const status of statuses) {
        const key = keys.runsByStatus(shard, status);
        if (terminal.has(status) && retentionMs > 0) pipe.zcount(key, now - retentionMs, '+inf');
        else pipe.zcard(key);
      }
      ((await pipe.exec()) ?? []).forEach(([err, n], i) => {
        if (err) throw err;
        out[statuses[i]!]! += Number(n);
      });
    }),
  );
  return out;
}
