/**
 * What an erasure keeps and what it replaces, as pure functions over the stored shapes (no Redis, no PostgreSQL), so
 * Redis and the archive are rewritten by the same rules. Kept: what an audit needs (run, action and call ids, tool
 * names, statuses and reasons (codes), the actions' idempotency keys, request ids, fingerprints (digests), receipts,
 * usage, times, who did what). Replaced by ERASED: every text that came from or was written for the customer (the
 * run's input and script, its intake event, the event key its wait names, the model's text and tool arguments, tool outputs, event payloads, a
 * follow-up's previous conversation, a ledger move's evidence).
 */
import type { JournalEntry } from '../core/journal.js';

export const ERASED = '[erased]';

/** Every string in `value` replaced by ERASED (numbers, booleans, nulls and the shape kept). */
export function redactAll(value: unknown): unknown {
  if (typeof value === 'string') return ERASED;
  if (Array.isArray(value)) return value.map(redactAll);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redactAll(v)]));
  }
  return value;
}

/**
 * Field names whose string values an audit keeps at the top of evidence or an event payload. Deeper, every string is
 * replaced: what is nested there (a service's answer, a lookup's findings) was written by someone else, who may have
 * used the same names for the customer's text (`{to: <email>, reason: 'customer wrote: ...'}`).
 */
const AUDIT_FIELDS = new Set([
  'runId',
  'actionId',
  'callId',
  'tool',
  'status',
  'state',
  'reason',
  'code',
  'step',
  'kind',
  'type',
  'from',
  'to',
  'by',
  'why',
  'at',
  'receipt',
  'idempotencyKey',
  'requestId',
  'fingerprint',
  'previousRunId',
  'nextRunId',
  'parentRunId',
  'childRunId',
  'jobId',
  'erasureId',
]);

/** Every string replaced but a top-level audit field's (an id, a status, a receipt); nested ones all replaced. */
export function redactKeepingAudit(value: unknown): unknown {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return redactAll(value);
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [k, typeof v === 'string' && AUDIT_FIELDS.has(k) ? v : redactAll(v)]),
  );
}

/** A journal entry with its customer text replaced (decisions: text, final answer, tool arguments; observations: output). */
export function redactEntry(e: JournalEntry): JournalEntry {
  switch (e.kind) {
    case 'decision':
      return {
        ...e,
        toolCalls: e.toolCalls.map((c) => ({ ...c, args: redactAll(c.args) })),
        ...(e.final !== undefined ? { final: ERASED } : {}),
        ...(e.text !== undefined ? { text: ERASED } : {}),
      };
    case 'observation':
      return { ...e, output: redactAll(e.output) };
    case 'status':
    case 'operator':
      // Codes, ids and operator names only.
      return e;
  }
}

/**
 * Spec fields an audit keeps; every other field's strings (input, script, the intake `event`: a client's
 * Idempotency-Key or a webhook's event id, which it may have made of the customer's data) are replaced. Nothing
 * matches on `event` once the run exists: its run id is derived from it (runIdForEvent) and the Idempotency-Key's
 * record is named by a digest (KeySpace.requestKey).
 */
const SPEC_KEPT = new Set([
  'v',
  'runId',
  'tenant',
  'agent',
  'key',
  'agentVersion',
  'toolsHash',
  'model',
  'modelId',
  'modelOptions',
  'limits',
  'createdAt',
  'parent',
  'previousRunId',
  'priority',
]);

export function redactSpec(spec: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(spec).map(([k, v]) => [k, SPEC_KEPT.has(k) ? v : redactAll(v)]));
}

/**
 * A run's wait record (the run hash's `wait`, JSON; src/runs/waits.ts) with the event key it names replaced: an agent
 * makes it of the customer's data (a ticket id, an email). Kept: that it waited, on what kind of wait, until when,
 * for which step, call and tool. A record that does not parse is replaced whole.
 */
export function redactWait(raw: string): string {
  try {
    const wait = JSON.parse(raw) as unknown;
    if (wait === null || typeof wait !== 'object' || Array.isArray(wait)) return ERASED;
    return JSON.stringify('key' in wait ? { ...wait, key: ERASED } : wait);
  } catch {
    return ERASED;
  }
}

/** An event's payload (JSON as written): JSON redacted keeping audit fields; anything else replaced whole. */
export function redactEventData(data: string): string {
  if (data === '') return data;
  try {
    return JSON.stringify(redactKeepingAudit(JSON.parse(data) as unknown));
  } catch {
    return ERASED;
  }
}

interface HistoryLike {
  evidence?: unknown;
  [k: string]: unknown;
}

/** A ledger move: its evidence redacted keeping audit fields (a receipt, a status code). */
export function redactHistory(h: HistoryLike): HistoryLike {
  return h.evidence === undefined ? h : { ...h, evidence: redactKeepingAudit(h.evidence) };
}

interface EffectLike {
  args?: unknown;
  output?: unknown;
  history?: HistoryLike[];
  [k: string]: unknown;
}

/** An effect as the run view shows it (ledger record plus history). */
export function redactEffect(e: EffectLike): EffectLike {
  return {
    ...e,
    ...(e.args !== undefined ? { args: redactAll(e.args) } : {}),
    ...(e.output !== undefined ? { output: redactAll(e.output) } : {}),
    ...(e.history ? { history: e.history.map(redactHistory) } : {}),
  };
}

/** The run view (GET /v1/runs/:id's body) as archived: transcript, effects and the spec's intake event redacted. */
export function redactView(view: Record<string, unknown>): Record<string, unknown> {
  const transcript = Array.isArray(view.transcript) ? (view.transcript as JournalEntry[]).map(redactEntry) : [];
  const effects = Array.isArray(view.effects) ? (view.effects as EffectLike[]).map(redactEffect) : [];
  return { ...view, ...(view.event !== undefined ? { event: redactAll(view.event) } : {}), transcript, effects };
}
