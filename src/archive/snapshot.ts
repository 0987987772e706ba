/**
 * A run's copy for the archive, read from Redis through the run store's own readers: the run record
 * (runRecord.ts), its budget, the run view (transcript decoded by the journal's decoders, so a deflated entry is read
 * as the text it stores; effects with every ledger move and its evidence), its events (runEvents.ts) and its links.
 */
import type { EngineContext } from '../runs/engineContext.js';
import { readAllEvents } from '../store/runEvents.js';
import { BUDGET_FIELD_NAMES, readBudget, readRun, RUN_FIELD_NAMES, type RunRecord } from '../store/runRecord.js';
import type { ArchivedRun } from './db.js';

/** Builds GET /v1/runs/:id's body for a run in Redis (src/http/runView.ts, given by the composition root). */
export type RunViewOf = (runId: string) => Promise<object | undefined>;

export interface RunSnapshot {
  row: ArchivedRun;
  /** The record as read: its finishedAt, erasedAt and revision fence the archive's mark (archiveCommitted-6.lua). */
  record: Pick<RunRecord, 'status' | 'finishedAt' | 'erasedAt' | 'revision'>;
}

/**
 * The run as the archive keeps it, or undefined when its keys are gone. The record is read first (its HMGET is sent
 * before any other read): a change after it (a later end, an erasure, a revision) shows in the fence, and the copy is
 * not marked as the run's last.
 */
export async function snapshotRun(
  ctx: Pick<EngineContext, 'redis' | 'keys'>,
  runId: string,
  viewOf: RunViewOf,
): Promise<RunSnapshot | undefined> {
  const k = ctx.keys.run(runId);
  const [record, budget, events, view] = await Promise.all([
    readRun(ctx.redis, ctx.keys, runId, RUN_FIELD_NAMES),
    readBudget(ctx.redis, ctx.keys, runId, BUDGET_FIELD_NAMES),
    readAllEvents(ctx.redis, k),
    viewOf(runId),
  ]);
  if (!record || !view) return undefined;
  const spec = parseObject(record.spec);
  const { spec: _spec, ...rest } = record;
  const viewObj = view as Record<string, unknown>;
  const children = Array.isArray(viewObj.children) ? (viewObj.children as { runId: string }[]).map((c) => c.runId) : [];
  const parent = spec?.parent as { runId?: string } | undefined;
  return {
    record,
    row: {
      runId,
      tenant: record.tenant,
      agent: record.agent,
      subjectKey: record.key,
      status: record.status,
      reason: record.reason,
      createdAtMs: record.createdAt,
      endedAtMs: record.finishedAt,
      erasedAtMs: Number(record.erasedAt ?? 0) || 0,
      revision: record.revision,
      previousRunId: record.previousRunId,
      nextRunId: record.nextRunId,
      parentRunId: parent?.runId,
      childRunIds: children,
      view: viewObj,
      spec,
      events: events.map((e) => ({ id: e.id, type: e.type, data: e.data })),
      budget,
      record: rest,
      searchFields: searchFieldsOf(record.search),
    },
  };
}

/**
 * The agent's search fields of the run (Agent.search, the run hash's `search`: the values Redis indexes it by), as the
 * archive stores them, so the archive is searched by the same names; `{}` for an agent that declares none or a run
 * erased (the erasure removes them).
 */
export function searchFieldsOf(raw: string | undefined): Record<string, string> {
  const v = parseObject(raw);
  if (!v || Array.isArray(v)) return {};
  return Object.fromEntries(Object.entries(v).filter((e): e is [string, string] => typeof e[1] === 'string'));
}

function parseObject(raw: string | undefined): Record<string, unknown> | undefined {
  if (raw === undefined) return undefined;
  try {
    const v = JSON.parse(raw) as unknown;
    return v !== null && typeof v === 'object' ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
