/**
 * Forgetting a customer (POST /v1/erasures): every run of a subject (or of a search field's value) has its customer
 * text replaced by a marker, in Redis and in the archive, keeping what an audit needs (src/archive/redact.ts says
 * which). The erasure itself is recorded, with who asked and when, in Redis (KeySpace.erasures) and in the archive
 * (`erasures`); a field's value only as a salted sha256 (`fieldDigest`).
 *
 * Which runs, of the request's tenant only: for a subject, its chain in Redis (its latest run per agent,
 * KeySpace.subjectLatest, then previousRunId links) and the runs of the tenant's subject search index (src/runs/
 * search.ts); for a field, the runs of that search value's index. Plus, with an archive, its rows of the subject or
 * whose stored search fields (the agent's, as Redis indexes them) hold the value, and their Redis copies if still
 * present. Without an archive, Redis alone answers both. Then every run those runs' agent tools started and every
 * follow-up of theirs, and theirs (addCopies): a child's input is its parent's text, a follow-up's previous
 * conversation its previous run's. Each such run is erased whole, as a run the request found.
 *
 * Beyond the runs' own keys: the payloads kept on the event keys their waits named (a delivery a wait took stays on
 * its key until the wait's due time plus EVENT_KEEP_MS, and a later one may be kept there), see eraseEventPayloads.
 *
 * Runs still at work, children included (any status but a terminal one: queued, running, parked for a person, an
 * approval, a wait) are refused before anything is written: their steps would carry on with the text, or write it again.
 * So are ended runs with a ledger action that may have left and has not settled (dispatched, outcome_unknown,
 * needs_human: a cancelled run's email whose outcome a person must still find, unsettledActions): its arguments are
 * what that person looks up. An ended run's action that never left (planned, authorized, safe_retry: NEVER_SENT_STATES,
 * a write whose dispatch kept meeting 429 until the run's deadline) is settled by the erasure itself, moved to
 * `rejected` with the erasure as evidence before the rewrite (rejectNeverSent): nothing sends it but a retry, and a
 * person has nothing to look up. A run's Redis
 * rewrite is one MULTI under WATCH of its keys, so a retry that starts it in between aborts the rewrite (taken again
 * up to ERASE_TRIES times, then refused as at work).
 */
import { createHash, randomBytes } from 'node:crypto';
import type { EngineContext } from '../runs/engineContext.js';
import {
  decodeEntry,
  decodeReadable,
  encodeEntry,
  type JournalEntry,
  journalEntrySchema,
  packEntry,
  packJournal,
  type StoredEntry,
  unpackJournal,
} from '../core/journal.js';
import { isTerminal } from '../core/status.js';
import { LedgerConflict, ledgerFor } from '../ledger/ledger.js';
import { NEVER_SENT_STATES, UNSETTLED_STATES, type LedgerState } from '../ledger/states.js';
import { packSpec, readRun, type RunField } from '../store/runRecord.js';
import {
  packEntries,
  splitStepEvents,
  STEP_EVENTS_FIELD,
  STEP_EVENTS_SEPARATOR,
  unpackEntries,
} from '../store/runEvents.js';
import { FOLDED_HISTORY_FIELD, foldMoves, unfoldMoves } from '../store/ledgerHistory.js';
import { indexedRunIds, type SearchTerm } from '../runs/search.js';
import { eventKeysAsked, parseWait } from '../runs/waits.js';
import { readJournal } from '../store/runJournal.js';
import { queueEraseSearchIndexes } from '../store/calls/eraseSearchIndexes.js';
import { watchedReplies } from '../store/connect.js';
import { SEARCH_SUBJECT } from '../store/keys.js';
import {
  archivedChildRunIds,
  archivedFollowUps,
  archivedRunsByField,
  archivedRunsOfSubject,
  archivedSubjectKeys,
  archivedTenant,
  archivedWaitSources,
  type ArchivePool,
} from './db.js';
import { archiveJson, archiveText, fromArchiveJson } from './pgText.js';
import {
  ERASED,
  redactAll,
  redactEntry,
  redactEventData,
  redactHistory,
  redactSpec,
  redactView,
  redactWait,
} from './redact.js';

export interface ErasureRequest {
  tenant: string;
  subject?: string | undefined;
  field?: { name: string; value: string } | undefined;
}

/** What the erasure recorded (Redis and the archive), and the answer of the route. */
export interface ErasureRecord {
  erasureId: string;
  tenant: string;
  subject?: string;
  field?: { name: string; valueSalt: string; valueSha256: string };
  requestedBy: string;
  requestedAt: string;
  /** Runs whose text was replaced, in Redis, in the archive, or both. */
  runIds: string[];
}

/**
 * An action of a run found that has not settled (UNSETTLED_STATES): the erasure waits for it where it may have left
 * (dispatched, outcome_unknown, needs_human), and rejects it where it never did (NEVER_SENT_STATES).
 */
export interface UnsettledAction {
  actionId: string;
  runId: string;
  state: LedgerState;
}

export type ErasureOutcome =
  | { kind: 'erased'; record: ErasureRecord }
  | { kind: 'at_work'; runIds: string[] }
  | { kind: 'actions_unsettled'; actions: UnsettledAction[] };

type ErasureContext = Pick<EngineContext, 'redis' | 'keys' | 'agents' | 'log' | 'metrics' | 'cfg'> & {
  archive?: { pool: ArchivePool } | undefined;
};

const ERASE_TRIES = 5;
/** Longest subject chain walked (a guard against a link cycle in a broken store). */
const MAX_CHAIN = 10_000;
/** Most child runs and follow-ups (and theirs) an erasure follows from the runs it found (a guard against a runaway tree). */
const MAX_DESCENDANTS = 10_000;

export async function eraseCustomer(
  ctx: ErasureContext,
  req: ErasureRequest,
  by: string,
  nowMs = Date.now(),
): Promise<ErasureOutcome> {
  try {
    return await erase(ctx, req, by, nowMs);
  } catch (err) {
    // Answered 500 by the route: counted and logged here (ids and codes only), so a failed erasure is seen even when
    // the requester's tool does not say; asking again is safe (each rewrite redacts what is there).
    ctx.metrics.erasures.inc({ outcome: 'failed' });
    ctx.log.error({ code: 'erasure_failed', tenant: req.tenant, by, err }, 'erasure failed: ask again');
    throw err;
  }
}

async function erase(ctx: ErasureContext, req: ErasureRequest, by: string, nowMs: number): Promise<ErasureOutcome> {
  const pool = ctx.archive?.pool;
  const runIds = await runsToErase(ctx, pool, req);
  const inRedis = await Promise.all(runIds.map((id) => readRun(ctx.redis, ctx.keys, id, ['tenant'])));
  const atWork = runIds.filter((_, i) => inRedis[i] !== undefined && !isTerminal(inRedis[i].status));
  if (atWork.length > 0) {
    ctx.metrics.erasures.inc({ outcome: 'at_work' });
    return { kind: 'at_work', runIds: atWork };
  }
  const ended = runIds.flatMap((runId, i) => {
    const run = inRedis[i];
    return run ? [{ runId, status: run.status }] : [];
  });
  const unsettled = await unsettledActions(ctx, ended);
  const waiting = unsettled.filter((a) => !NEVER_SENT_STATES.has(a.state));
  if (waiting.length > 0) {
    ctx.metrics.erasures.inc({ outcome: 'actions_unsettled' });
    return { kind: 'actions_unsettled', actions: waiting };
  }
  const erasureId = `er_${randomBytes(12).toString('hex')}`;
  const moved = await rejectNeverSent(ctx, unsettled, erasureId, by);
  if (moved.length > 0) {
    ctx.metrics.erasures.inc({ outcome: 'actions_unsettled' });
    return { kind: 'actions_unsettled', actions: moved };
  }
  // The event keys the runs' waits named: read before the rewrite replaces the arguments they derive from.
  const waited = new Map<string, string[]>();
  for (const runId of runIds) waited.set(runId, await waitedEventKeys(ctx, pool, runId));
  const raced: string[] = [];
  for (const [i, runId] of runIds.entries()) {
    if (inRedis[i] === undefined) continue;
    if ((await eraseRunInRedis(ctx, runId, nowMs)) === 'at_work') raced.push(runId);
  }
  await eraseEventPayloads(
    ctx,
    runIds.filter((id) => !raced.includes(id)),
    waited,
  );
  if (pool) for (const runId of runIds) await eraseRunInArchive(pool, runId, nowMs);
  const record: ErasureRecord = {
    erasureId,
    tenant: req.tenant,
    ...(req.subject !== undefined ? { subject: req.subject } : {}),
    ...(req.field ? { field: { name: req.field.name, ...fieldDigest(req.field.value) } } : {}),
    requestedBy: by,
    requestedAt: new Date(nowMs).toISOString(),
    runIds: runIds.filter((id) => !raced.includes(id)),
  };
  await ctx.redis.lpush(ctx.keys.erasures(), JSON.stringify(record));
  if (pool) {
    await pool.query(
      `INSERT INTO erasures (id, tenant, subject_key, field_name, field_value_sha256, field_value_salt, requested_by,
       requested_at, run_ids) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
      [
        record.erasureId,
        archiveText(record.tenant),
        record.subject === undefined ? null : archiveText(record.subject),
        record.field?.name ?? null,
        record.field?.valueSha256 ?? null,
        record.field?.valueSalt ?? null,
        by,
        record.requestedAt,
        JSON.stringify(record.runIds),
      ],
    );
  }
  ctx.log.info({ code: 'customer_erased', erasureId: record.erasureId, runs: record.runIds.length, by }, 'erased');
  if (raced.length > 0) {
    ctx.metrics.erasures.inc({ outcome: 'at_work' });
    return { kind: 'at_work', runIds: raced };
  }
  ctx.metrics.erasures.inc({ outcome: 'erased' });
  return { kind: 'erased', record };
}

/** An unsettled action of an ended run, with what its rejection records: its tool and its run's status. */
type FoundAction = UnsettledAction & { tool: string; runStatus: string };

/**
 * The actions of the ended `runs` not settled (UNSETTLED_STATES), in Redis (an ended run's ledger; a run held for a
 * person is kept there, includes/expireRun.lua). The arguments of one that may have left (dispatched, outcome_unknown,
 * needs_human) are what a person looks for at the service to find the outcome (the recipient, the order), and what a
 * sweep's same-key replay sends: an erasure now would leave the person nothing to look up, and send the marker. Ledger
 * moves only go forward, and an ended run plans nothing new (a retry brings it back to work first, which the
 * rewrite's WATCH finds), so a settled action stays settled under the rewrite.
 */
async function unsettledActions(
  ctx: ErasureContext,
  runs: readonly { runId: string; status: string }[],
): Promise<FoundAction[]> {
  const out: FoundAction[] = [];
  for (const { runId, status } of runs) {
    for (const key of (await ctx.redis.smembers(ctx.keys.run(runId).actions)).sort()) {
      const [actionId, state, tool] = await ctx.redis.hmget(key, 'actionId', 'state', 'tool');
      if (actionId && state && UNSETTLED_STATES.has(state as LedgerState))
        out.push({ actionId, runId, state: state as LedgerState, tool: tool ?? '', runStatus: status });
    }
  }
  return out;
}

/**
 * Settles the never-sent actions of ended runs (NEVER_SENT_STATES: planned, authorized, safe_retry) before the
 * rewrite: each moves to `rejected` (never sent, and never to be) by the ledger's compare-and-set
 * (ledgerTransition-6.lua), its history naming the erasure and who asked. On an ended run nothing sends such an action
 * but a retry, whose step the rejection answers from the ledger (the runner's `rejected`: nothing sent), and a person
 * has nothing to look up. Counted as every ledger move is (agent_effects_total{state="rejected"}) and logged
 * `erasure_rejected_action` (ids only). The actions found in another state meanwhile (the run retried and sent it):
 * those not settled are returned, and the erasure refuses as for any action not settled.
 */
async function rejectNeverSent(
  ctx: ErasureContext,
  found: readonly FoundAction[],
  erasureId: string,
  by: string,
): Promise<UnsettledAction[]> {
  const ledger = ledgerFor(ctx);
  const moved: UnsettledAction[] = [];
  for (const a of found) {
    if (!NEVER_SENT_STATES.has(a.state)) continue;
    const reason = 'customer_erased';
    try {
      await ledger.transition(
        a.runId,
        a.actionId,
        a.state,
        'rejected',
        {
          by,
          why: "never sent: the customer's erasure rejected it (its run had ended)",
          evidence: { reason, erasureId, status: a.runStatus },
        },
        { output: JSON.stringify({ rejected: true, reason, erasureId }) },
      );
    } catch (err) {
      if (!(err instanceof LedgerConflict)) throw err;
      if (UNSETTLED_STATES.has(err.actual as LedgerState))
        moved.push({ actionId: a.actionId, runId: a.runId, state: err.actual as LedgerState });
      continue;
    }
    ctx.metrics.effects.inc({ tool: a.tool, state: 'rejected' });
    ctx.log.info(
      {
        code: 'erasure_rejected_action',
        erasureId,
        runId: a.runId,
        actionId: a.actionId,
        tool: a.tool,
        from: a.state,
        by,
      },
      "never-sent action rejected by the customer's erasure",
    );
  }
  return moved;
}

/** The runs of the request (see the module's comment), each once, of the request's tenant only. */
async function runsToErase(ctx: ErasureContext, pool: ArchivePool | undefined, req: ErasureRequest): Promise<string[]> {
  const found = new Set<string>();
  const terms: SearchTerm[] = [];
  if (req.subject !== undefined) {
    for (const agent of ctx.agents.names) {
      let id = await ctx.redis.get(ctx.keys.subjectLatest(req.tenant, agent, req.subject));
      for (let n = 0; id && !found.has(id) && n < MAX_CHAIN; n++) {
        const run = await readRun(ctx.redis, ctx.keys, id, ['tenant', 'key', 'previousRunId']);
        if (!run || run.tenant !== req.tenant || run.key !== req.subject) break;
        found.add(id);
        id = run.previousRunId ?? null;
      }
    }
    terms.push({ field: SEARCH_SUBJECT, value: req.subject });
    if (pool) for (const id of await archivedRunsOfSubject(pool, req.tenant, req.subject)) found.add(id);
  }
  if (req.field) {
    terms.push({ field: req.field.name, value: req.field.value });
    if (pool)
      for (const id of await archivedRunsByField(pool, req.tenant, req.field.name, req.field.value)) found.add(id);
  }
  // The search indexes (the tenant's own): a run of the subject off its chain, a run found only by a search value.
  for (const term of terms) {
    for (const id of await indexedRunIds(ctx.redis, ctx.keys, req.tenant, term)) {
      if (found.has(id)) continue;
      const run = await readRun(ctx.redis, ctx.keys, id, ['tenant']);
      // An entry whose run expired names nothing left in Redis (the archive's rows were read above).
      if (run?.tenant === req.tenant) found.add(id);
    }
  }
  await addCopies(ctx, pool, req.tenant, found);
  return [...found].sort();
}

/**
 * Adds to `found` the runs that carry its runs' text, and the runs that carry theirs, of the tenant:
 * - the runs its runs' agent tools started (src/runs/children.ts): a child's input is its parent's text (a ticket's
 *   words handed on as a refund's reason), under a subject key of its own that no search of the parent's subject
 *   finds. A run's children: its `children` set in Redis and, with an archive, its row's child_run_ids.
 * - its runs' follow-ups (createRun-14.lua links the subject's next run to it): a follow-up's previous conversation
 *   (`followUpContext`, src/worker/followUp.ts) is its previous run's input and answer, and the conversation before
 *   that, given to its model and written into its hash; the follow-up of a run found by a field value (another
 *   message of the ticket, from another address) no search of that value finds. A run's follow-up: its hash's
 *   `nextRunId` and, with an archive, followUpsInArchive; of a run Redis let go, followUpsInRedis.
 * A run listed that neither store holds any more has nothing left to erase. Each run once (a cycle in a broken store
 * ends), MAX_DESCENDANTS at most.
 */
async function addCopies(
  ctx: ErasureContext,
  pool: ArchivePool | undefined,
  tenant: string,
  found: Set<string>,
): Promise<void> {
  let level = [...found];
  let added = 0;
  while (level.length > 0) {
    const listed = new Set<string>();
    const gone: string[] = [];
    for (const id of level) {
      for (const child of await ctx.redis.smembers(ctx.keys.run(id).children)) listed.add(child);
      const run = await readRun(ctx.redis, ctx.keys, id, ['nextRunId']);
      if (run?.nextRunId !== undefined) listed.add(run.nextRunId);
      if (!run) gone.push(id);
    }
    if (pool) {
      for (const child of await archivedChildRunIds(pool, tenant, level)) listed.add(child);
      for (const next of await archivedFollowUps(pool, tenant, level)) listed.add(next);
      for (const next of await followUpsInRedis(ctx, pool, tenant, gone)) listed.add(next);
    }
    const next: string[] = [];
    for (const copy of [...listed].sort()) {
      if (found.has(copy)) continue;
      if (added >= MAX_DESCENDANTS) {
        ctx.log.warn({ code: 'erasure_tree_truncated', max: MAX_DESCENDANTS }, 'erasure stopped following copies');
        return;
      }
      const run = await readRun(ctx.redis, ctx.keys, copy, ['tenant']);
      const copyTenant = run ? run.tenant : pool ? await archivedTenant(pool, copy) : undefined;
      if (copyTenant !== tenant) continue;
      found.add(copy);
      next.push(copy);
      added++;
    }
    level = next;
  }
}

/**
 * The follow-ups still in Redis of runs only the archive holds: the link from such a run (its hash's `nextRunId`)
 * went with its keys, and its row may have been copied before the follow-up was created. A follow-up is a run of the
 * same subject whose `previousRunId` names the run: read from the tenant's subject search index of each run's
 * subject key (as archived).
 */
async function followUpsInRedis(
  ctx: ErasureContext,
  pool: ArchivePool,
  tenant: string,
  gone: readonly string[],
): Promise<string[]> {
  const previous = new Set(gone);
  const out: string[] = [];
  for (const subject of await archivedSubjectKeys(pool, tenant, gone))
    for (const id of await indexedRunIds(ctx.redis, ctx.keys, tenant, { field: SEARCH_SUBJECT, value: subject })) {
      const run = await readRun(ctx.redis, ctx.keys, id, ['previousRunId']);
      if (run?.previousRunId !== undefined && previous.has(run.previousRunId)) out.push(id);
    }
  return out;
}

/**
 * The event hashes (KeySpace.eventKey) of the keys a run's waits named: each call of its agent's event-wait tools
 * asked again from its journalled decision (eventKeysAsked; the journal in Redis, else the archive's transcript),
 * and the wait still recorded on the run hash (a run that ended parked). Of a run whose agent this process does not
 * run (or no longer has that tool), only the recorded wait.
 */
async function waitedEventKeys(ctx: ErasureContext, pool: ArchivePool | undefined, runId: string): Promise<string[]> {
  const run = await readRun(ctx.redis, ctx.keys, runId, ['tenant', 'agent', 'spec', 'wait']);
  let source: { tenant: string; agent: string; input: unknown; transcript: JournalEntry[] } | undefined;
  if (run) {
    const spec = run.spec === undefined ? undefined : parseJson(run.spec);
    const stored = await readJournal(ctx.redis, ctx.keys.run(runId));
    source = {
      tenant: run.tenant,
      agent: run.agent,
      input: spec !== null && typeof spec === 'object' ? (spec as { input?: unknown }).input : undefined,
      transcript: decodeReadable(stored),
    };
  } else if (pool) {
    const row = await archivedWaitSources(pool, runId);
    if (row)
      source = {
        tenant: row.tenant,
        agent: row.agent,
        input: row.input,
        transcript: (Array.isArray(row.transcript) ? (row.transcript as unknown[]) : []).flatMap((e) => {
          const parsed = journalEntrySchema.safeParse(e);
          return parsed.success ? [parsed.data] : [];
        }),
      };
  }
  if (!source) return [];
  const agent = ctx.agents.get(source.agent);
  const keys = new Set(agent ? eventKeysAsked(agent, { runId, input: source.input }, source.transcript) : []);
  const wait = parseWait(run?.wait);
  // An earlier erasure replaced the key: it names nothing any more.
  if (wait?.kind === 'event' && wait.key !== ERASED) keys.add(wait.key);
  return [...keys].map((key) => ctx.keys.eventKey(source.tenant, source.agent, key));
}

/**
 * Replaces the payloads kept on the event hashes the erased runs' waits named (redactAll: every string): the delivery
 * an erased run's wait took (consumed), or that was given to it and never taken (delivered), and a delivery kept on
 * the key for a wait to come (pending: a sender's retry after the wait took the first, a later reply on the key). A
 * delivery of another run's wait on the key is left alone. The hash keeps its state, ids and expiry: a wait asked
 * again reads the marker. One MULTI under WATCH of the key per rewrite, so a delivery or a wait in between is read
 * again (up to ERASE_TRIES times).
 */
async function eraseEventPayloads(
  ctx: ErasureContext,
  runIds: readonly string[],
  waited: ReadonlyMap<string, readonly string[]>,
): Promise<void> {
  const byKey = new Map<string, Set<string>>();
  for (const runId of runIds)
    for (const key of waited.get(runId) ?? []) byKey.set(key, (byKey.get(key) ?? new Set()).add(runId));
  if (byKey.size === 0) return;
  const conn = ctx.redis.duplicate();
  conn.on('error', () => {});
  try {
    for (const [key, erased] of byKey) {
      for (let attempt = 0; attempt < ERASE_TRIES; attempt++) {
        await conn.watch(key);
        const [state, runId, payload] = (await conn.hmget(key, 'state', 'runId', 'payload')).map((v) => v ?? undefined);
        const ours = state === 'pending' || (runId !== undefined && erased.has(runId));
        const redacted = payload === undefined ? undefined : JSON.stringify(redactAll(parseJson(payload)));
        if (!ours || redacted === undefined || redacted === payload) {
          await conn.unwatch();
          break;
        }
        if ((await watchedReplies(conn.multi().hset(key, 'payload', redacted), 'event payload erasure')) !== null)
          break;
      }
    }
  } finally {
    conn.disconnect();
  }
}

/** A journal entry with the customer's text replaced; an entry that no longer parses cannot be told apart: replaced whole. */
function redactStored(raw: StoredEntry, index: number): StoredEntry {
  try {
    return packEntry(encodeEntry(redactEntry(decodeEntry(raw, index))));
  } catch {
    return ERASED;
  }
}

/** A packed journal with every entry redacted (redactStored); one that no longer unpacks is replaced whole. */
function redactPackedJournal(packed: Buffer): Buffer {
  let entries: string[];
  try {
    entries = unpackJournal(packed);
  } catch {
    return packJournal([ERASED]);
  }
  return packJournal(
    entries.map((json, i) => {
      try {
        return encodeEntry(redactEntry(decodeEntry(json, i)));
      } catch {
        return ERASED;
      }
    }),
  );
}

/** Rewrites one run's text in Redis (one MULTI under WATCH); `at_work` when it went back to work meanwhile. */
async function eraseRunInRedis(ctx: ErasureContext, runId: string, nowMs: number): Promise<'erased' | 'at_work'> {
  const k = ctx.keys.run(runId);
  const conn = ctx.redis.duplicate();
  conn.on('error', () => {});
  try {
    for (let attempt = 0; attempt < ERASE_TRIES; attempt++) {
      await conn.watch(k.run, k.journal, k.journalPacked, k.events, k.eventsPacked, k.actions);
      const run = await readRun(conn, ctx.keys, runId, ['spec', 'followUpContext', 'search', 'searchKeys', 'wait']);
      if (!run) {
        await conn.unwatch();
        return 'erased';
      }
      if (!isTerminal(run.status)) {
        await conn.unwatch();
        return 'at_work';
      }
      const [journal, packedJournal, events, packedEvents, actionKeys] = await Promise.all([
        conn.lrangeBuffer(k.journal, 0, -1),
        conn.getBuffer(k.journalPacked),
        conn.xrange(k.events, '-', '+'),
        conn.getBuffer(k.eventsPacked),
        conn.smembers(k.actions),
      ]);
      // The records and histories too: compacting an ended run folds a history into its record (src/runs/compact.ts).
      if (actionKeys.length > 0)
        await conn.watch(...actionKeys, ...actionKeys.map((key) => ctx.keys.actionHistory(key)));
      const actions = await Promise.all(
        actionKeys.map(async (key) => ({
          key,
          record: await conn.hmget(key, 'args', 'output', FOLDED_HISTORY_FIELD),
          history: await conn.lrange(ctx.keys.actionHistory(key), 0, -1),
        })),
      );
      const tx = conn.multi();
      const runFields: Partial<Record<RunField, string>> = { erasedAt: String(nowMs) };
      if (run.spec !== undefined)
        runFields.spec = packSpec(JSON.stringify(redactSpec(JSON.parse(run.spec) as Record<string, unknown>)));
      if (run.followUpContext !== undefined) runFields.followUpContext = ERASED;
      // A run that ended parked keeps its wait: its event key goes, that it waited and on what kind of event stay.
      if (run.wait !== undefined) runFields.wait = redactWait(run.wait);
      tx.hset(k.run, runFields);
      // The agent's search values are the customer's own (an email, an order id): gone from the run and its indexes,
      // and the index names (`searchKeys`), a digest of each value (sha256 of an email is found again by hashing the
      // email). A run held for its archive still counts in its indexes: let go of them here, with the retention.
      if (run.search !== undefined || run.searchKeys !== undefined)
        queueEraseSearchIndexes(tx, k, runId, ctx.cfg.RUN_RETENTION_MS);
      // The run's hand-offs (src/runs/children.ts): digests of its agent tools' arguments, as a search key's is of
      // its value; an ended run asks for no more hand-offs.
      tx.del(k.handoffs);
      journal.forEach((raw, i) => tx.lset(k.journal, i, redactStored(raw, i)));
      // An ended run's journal packed beside the list (src/store/runJournal.ts): redacted, packed again, TTL kept.
      if (packedJournal) tx.set(k.journalPacked, redactPackedJournal(packedJournal), 'KEEPTTL');
      if (events.length > 0) {
        tx.del(k.events);
        for (const [id, fields] of events) tx.xadd(k.events, id, ...redactEventFields(fields));
      }
      // An ended run's events packed beside the stream (src/store/runEvents.ts): redacted, packed again, TTL kept.
      if (packedEvents)
        tx.set(
          k.eventsPacked,
          packEntries(unpackEntries(packedEvents).map(([id, fields]) => [id, redactEventFields(fields)] as const)),
          'KEEPTTL',
        );
      for (const a of actions) {
        const [args, output, folded] = a.record;
        const set: Record<string, string> = {};
        if (args) set.args = JSON.stringify(redactAll(parseJson(args)));
        if (output) set.output = JSON.stringify(redactAll(parseJson(output)));
        // The moves folded into the record once the run ended (src/store/ledgerHistory.ts).
        if (folded)
          set[FOLDED_HISTORY_FIELD] = foldMoves(
            unfoldMoves(folded).map((h) => JSON.stringify(redactHistory(parseJson(h) as Record<string, unknown>))),
          );
        if (Object.keys(set).length > 0) tx.hset(a.key, set);
        if (a.history.length > 0) {
          const historyKey = ctx.keys.actionHistory(a.key);
          tx.del(historyKey);
          tx.rpush(
            historyKey,
            ...a.history.map((h) => JSON.stringify(redactHistory(parseJson(h) as Record<string, unknown>))),
          );
        }
      }
      // The rewrite keeps each key's TTL only where it rewrote in place: give rewritten keys the run's TTL back.
      const ttl = await conn.pttl(k.run);
      if (ttl > 0) {
        tx.pexpire(k.events, ttl);
        for (const a of actions) if (a.history.length > 0) tx.pexpire(ctx.keys.actionHistory(a.key), ttl);
      }
      if ((await watchedReplies(tx, 'run erasure')) !== null) return 'erased';
    }
    return 'at_work';
  } finally {
    conn.disconnect();
  }
}

/**
 * Rewrites one run's archive row (in a transaction, the row locked), if the archive has it: read, redacted and written
 * back through the archive's escape of NUL (src/archive/pgText.ts), so what it keeps reads back as Redis' copy does.
 */
async function eraseRunInArchive(pool: ArchivePool, runId: string, nowMs: number): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const res = await client.query<{
      view: Record<string, unknown>;
      spec: Record<string, unknown> | null;
      events: { id: string; type: string; data: string }[];
      record: Record<string, unknown>;
    }>('SELECT view, spec, events, record FROM archived_runs WHERE run_id = $1 FOR UPDATE', [runId]);
    const row = res.rows[0] && fromArchiveJson(res.rows[0]);
    if (row) {
      // The row's record is the run hash less its spec: its fields are the run hash's.
      const record: Partial<Record<RunField, unknown>> = { ...row.record, erasedAt: String(nowMs) };
      if (record.followUpContext !== undefined) record.followUpContext = ERASED;
      if (typeof record.wait === 'string') record.wait = redactWait(record.wait);
      delete record.search;
      delete record.searchKeys;
      await client.query(
        `UPDATE archived_runs SET view = $2, spec = $3, events = $4, record = $5, search_fields = '{}',
           erased_at_ms = GREATEST(erased_at_ms, $6), versions = versions + 1 WHERE run_id = $1`,
        [
          runId,
          archiveJson(redactView(row.view)),
          row.spec === null ? null : archiveJson(redactSpec(row.spec)),
          archiveJson(row.events.map((e) => ({ ...e, data: redactEventData(e.data) }))),
          archiveJson(record),
          nowMs,
        ],
      );
    }
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}

/** An event entry's fields with every `data` value redacted. */
export function redactEventFields(fields: readonly string[]): string[] {
  return fields.map((v, j) => {
    if (j % 2 === 0) return v;
    if (fields[j - 1] === 'data') return redactEventData(v);
    // A step's three events in one field (src/store/runEvents.ts): each payload redacted as a data field's.
    if (fields[j - 1] === STEP_EVENTS_FIELD) return splitStepEvents(v).map(redactEventData).join(STEP_EVENTS_SEPARATOR);
    return v;
  });
}

function parseJson(raw: string): unknown {
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    return ERASED;
  }
}

function sha256(s: string): string {
  return createHash('sha256').update(s).digest('hex');
}

/**
 * What the record keeps of an erased field's value: the sha256 of a random salt's hex followed by the value. Someone
 * who holds a value can check it against the record (`printf '%s%s' "$salt" "$value" | sha256sum`), but no table of
 * common values (every address of a domain, say) reverses a record, as it would an unsalted sha256.
 */
export function fieldDigest(value: string): { valueSalt: string; valueSha256: string } {
  const valueSalt = randomBytes(16).toString('hex');
  return { valueSalt, valueSha256: sha256(valueSalt + value) };
}
