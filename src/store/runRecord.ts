/**
 * The run's record in Redis, typed: every field of the run hash (`KeySpace.run(id).run`) and of its budget hash
 * (`.budget`) is named once here, with how its stored string reads back. TypeScript reads a run through
 * `readRun` / `readBudget` (or `decodeRun` on values it fetched itself, in a pipeline with other reads); the Lua
 * scripts under src/store/lua write the same names (createRun-14.lua, commitStep-23.lua, ...), and the record's
 * first writer is `newRunRecord` (src/runs/store.ts sends it to createRun).
 *
 * Reading a field no run ever has is a type error, and a status is a `RunStatus`, never a bare string.
 */
import { dictionaryCodec } from '../core/dictionaryCodec.js';
import type { RedisClient } from './connect.js';
import type { KeySpace } from './keys.js';
import { InvariantError } from '../core/errors.js';
import { isRunStatus, type RunStatus } from '../core/status.js';

type Decode<T> = (raw: string | null) => T;

const text: Decode<string> = (raw) => raw ?? '';
/** A count or a time in ms: absent reads 0 (a run written before the field existed). */
const count: Decode<number> = (raw) => {
  const n = Number(raw ?? 0);
  return Number.isFinite(n) ? n : 0;
};
const flag: Decode<boolean> = (raw) => raw === '1';
const optional: Decode<string | undefined> = (raw) => (raw === null || raw === '' ? undefined : raw);
/** A text whose absence means something other than '' (not written yet). */
const present: Decode<string | undefined> = (raw) => raw ?? undefined;
const status: Decode<RunStatus> = (raw) => {
  if (isRunStatus(raw)) return raw;
  // Only our scripts write a status, from the one list (src/core/status.ts): anything else is a broken store.
  throw new InvariantError('invariant', `run_status_unknown: ${String(raw).slice(0, 40)}`);
};

/**
 * A packed spec's first character: the rest is base64 of the spec's JSON, compressed by SPEC_CODEC. A spec's
 * JSON starts with `{`, so a spec written as JSON reads as it always did. Base64, not bytes: every reader of the run
 * hash reads strings. Another codec or dictionary takes another marker, never this one.
 */
const SPEC_MARKER = '~';
/** The spec's own field names (nothing an agent names): a short spec finds its skeleton in the window. */
const SPEC_CODEC = dictionaryCodec(
  '{"v":2,"runId":"r_","tenant":"","agent":"","key":"","input":{"id":"","subject":"","body":"","customer":{"email":"","name":""}},' +
    '"model":"","modelId":"","agentVersion":"","toolsHash":"","limits":{"maxSteps":20,"maxTokens":100000,"maxWallMs":900000,' +
    '"deadlineAt":1},"createdAt":1,"search":{}}',
);

/**
 * The stored form of an ended run's spec (src/runs/compact.ts): packed when that is shorter, else the JSON as it is.
 * Read back by the `spec` field's decoder, so no reader sees the difference.
 */
export function packSpec(json: string): string {
  if (json.startsWith(SPEC_MARKER)) return json;
  const packed = SPEC_MARKER + SPEC_CODEC.deflate(json).toString('base64');
  return packed.length < Buffer.byteLength(json) ? packed : json;
}

/** A spec's JSON from its stored form (JSON, or packed by packSpec). */
export function unpackSpec(raw: string): string {
  if (!raw.startsWith(SPEC_MARKER)) return raw;
  try {
    return SPEC_CODEC.inflate(Buffer.from(raw.slice(1), 'base64')).toString('utf8');
  } catch (err) {
    throw new PackedSpecUnreadable(err);
  }
}

/**
 * A packed spec whose bytes do not inflate: the stored record is damaged (a partial restore, a bad copy). Its own
 * class, so a reader that answers a spec it cannot parse (RunStore.parentBar: `invalid_spec`) answers this one alike,
 * at the field `packed`, instead of failing.
 */
export class PackedSpecUnreadable extends InvariantError {
  readonly field = 'packed';
  constructor(cause: unknown) {
    super('invariant', 'run_spec_unreadable: a packed spec does not inflate', {}, { cause });
  }
}

const spec: Decode<string | undefined> = (raw) => (raw === null || raw === '' ? undefined : unpackSpec(raw));

/** The run hash: each field and how it reads back. */
const RUN_FIELDS = {
  status,
  /** Why the run is in its status (a code, then detail): '' while it works. */
  reason: text,
  /** The step the run is at (1-based). */
  cursor: count,
  tenant: text,
  agent: text,
  /** The subject key (agent.key(input)): a subject's runs form a chain. */
  key: text,
  createdAt: count,
  updatedAt: count,
  /** When the run ended (0 while it has not). */
  finishedAt: count,
  agentVersion: text,
  toolsHash: text,
  /** The pinned provider's name. */
  model: text,
  /** The last step whose model decision is journalled, and that decision's journal index. */
  decidedStep: count,
  decisionIndex: count,
  /** The run's current step job: only that job may commit. */
  jobId: text,
  /** How often the stuck-run sweep re-created a running run's lost step job (src/runs/stuckRuns.ts bounds it). */
  jobRecreations: count,
  /** The immutable run spec, JSON (src/runs/spec.ts parses it); an ended run's may be stored packed (packSpec). */
  spec,
  cancelRequested: flag,
  cancelReason: optional,
  /** What a parked run waits for, JSON (src/runs/waits.ts parses it). */
  wait: optional,
  /** Operator resumes and retries so far (each names its job `.r<n>`). */
  resumes: count,
  retries: count,
  /** The subject's run before this one and after it. */
  previousRunId: optional,
  nextRunId: optional,
  /** The action an approval park waits on. */
  approvalFor: optional,
  /** The previous conversation a follow-up's first step carries (src/worker/followUp.ts). */
  followUpContext: present,
  /** The step and delivery whose streamed text the run's events hold (appendTextDeltas-3.lua). */
  streamStep: count,
  streamDelivery: text,
  /** When the run's archive row was committed (0: not archived; src/archive/archiver.ts). */
  archivedAt: count,
  /** When the run's customer text was last erased (absent: never; src/archive/erasure.ts). */
  erasedAt: optional,
  /**
   * Changes to the ended run since its end that its archive row must follow (a ledger move settling an action after
   * the end, a person's finding): counted by includes/expireRun.lua reviseEndedRun, the row's version after its end
   * and erasure times (0: none).
   */
  revision: count,
  /** The agent's search fields of the run's input, JSON object (the spec's `search`, for listings). */
  search: optional,
  /** The run's search index keys, JSON array (written by createRun; includes/searchIndex.lua keeps them). */
  searchKeys: optional,
  /** Whether the run counts as live in its search indexes (includes/searchIndex.lua). */
  searchLive: flag,
  /**
   * An ended run kept without its retention TTL while an action of it waits (outcome unknown, or in the human queue
   * for a person): includes/expireRun.lua sets it, and the move that ends the last wait lets the run go.
   */
  retentionHeld: flag,
  /**
   * A child run whose parent's wake took its outcome: the parent's run id (takeChildOutcome-1.lua). The scripts that
   * would put the run back to work refuse it (includes/outcomeTaken.lua).
   */
  outcomeTakenBy: optional,
} satisfies Record<string, Decode<unknown>>;

/** The budget hash: the limits in force and what the run has used. */
const BUDGET_FIELDS = {
  maxSteps: count,
  maxTokens: count,
  maxWallMs: count,
  deadlineAt: count,
  stepsUsed: count,
  tokensUsed: count,
  /** Absent in a budget hash written before the context was counted: the step's usage then leaves it out. */
  contextBytes: (raw: string | null) => (raw === null ? undefined : count(raw)),
  /** Operator retries that extended the limits (retryRun-17.lua). */
  extensions: count,
  /** The run's money budget in µ$ (absent or 0: none; src/core/prices.ts). */
  maxCost: count,
  /** What the run's model attempts cost, in µ$, failed attempts included (charged with the tokens). */
  costUsed: count,
} satisfies Record<string, Decode<unknown>>;

export type RunField = keyof typeof RUN_FIELDS;
/** Every field of the run hash (what an archive copies). */
export const RUN_FIELD_NAMES = Object.keys(RUN_FIELDS) as RunField[];
export type RunRecord = { [F in RunField]: ReturnType<(typeof RUN_FIELDS)[F]> };
export type BudgetField = keyof typeof BUDGET_FIELDS;
/** Every field of the budget hash. */
export const BUDGET_FIELD_NAMES = Object.keys(BUDGET_FIELDS) as BudgetField[];
export type BudgetRecord = { [F in BudgetField]: ReturnType<(typeof BUDGET_FIELDS)[F]> };

/**
 * Decodes the values of an HMGET of the run hash for `fields` (status first, as `runFieldsToRead` asks):
 * undefined when the run does not exist (its status is absent).
 */
export function decodeRun<F extends RunField>(
  fields: readonly F[],
  values: readonly (string | null)[],
): Pick<RunRecord, F | 'status'> | undefined {
  if (values[0] === null || values[0] === undefined) return undefined;
  const out: Record<string, unknown> = { status: status(values[0]) };
  fields.forEach((f, i) => {
    if (f !== 'status') out[f] = RUN_FIELDS[f](values[i + 1] ?? null);
  });
  return out as Pick<RunRecord, F | 'status'>;
}

/** The field names an HMGET for `decodeRun(fields, ...)` sends: the status (whether the run exists), then `fields`. */
export function runFieldsToRead(fields: readonly RunField[]): string[] {
  return ['status', ...fields];
}

/** Reads `fields` of a run (and its status): undefined when the run does not exist. */
export async function readRun<F extends RunField>(
  redis: RedisClient,
  keys: KeySpace,
  runId: string,
  fields: readonly F[],
): Promise<Pick<RunRecord, F | 'status'> | undefined> {
  const values = await redis.hmget(keys.run(runId).run, ...runFieldsToRead(fields));
  return decodeRun(fields, values);
}

/**
 * What an ended run's compaction fences on (src/runs/compact.ts), read in its MULTI beside the events and the
 * journal: the status, when the run ended, whether it was erased, and the spec as stored (packed or JSON), since
 * the fence hashes the stored bytes, not the spec they decode to.
 */
export const ENDED_RUN_FIELDS = ['status', 'finishedAt', 'erasedAt', 'spec'] as const;

/** The values of an HMGET of ENDED_RUN_FIELDS; the status undefined when the run does not exist. */
export function decodeEndedRun(values: readonly (string | null)[]): {
  status: RunStatus | undefined;
  finishedAt: number;
  erasedAt: string | undefined;
  storedSpec: string | undefined;
} {
  const [rawStatus, finishedAt, erasedAt, storedSpec] = values;
  return {
    status: rawStatus === null || rawStatus === undefined ? undefined : status(rawStatus),
    finishedAt: RUN_FIELDS.finishedAt(finishedAt ?? null),
    erasedAt: RUN_FIELDS.erasedAt(erasedAt ?? null),
    storedSpec: storedSpec === null || storedSpec === undefined || storedSpec === '' ? undefined : storedSpec,
  };
}

/** A run's status, or undefined when the run does not exist. */
export async function readStatus(redis: RedisClient, keys: KeySpace, runId: string): Promise<RunStatus | undefined> {
  return (await readRun(redis, keys, runId, []))?.status;
}

/** The statuses of several runs, by position (undefined for one that does not exist). */
export async function readStatuses(
  redis: RedisClient,
  keys: KeySpace,
  runIds: readonly string[],
): Promise<(RunStatus | undefined)[]> {
  return Promise.all(runIds.map((id) => readStatus(redis, keys, id)));
}

/** Reads `fields` of a run's budget hash (absent fields read 0). */
export async function readBudget<F extends BudgetField>(
  redis: RedisClient,
  keys: KeySpace,
  runId: string,
  fields: readonly F[],
): Promise<Pick<BudgetRecord, F>> {
  const values = await redis.hmget(keys.run(runId).budget, ...fields);
  return Object.fromEntries(fields.map((f, i) => [f, BUDGET_FIELDS[f](values[i] ?? null)])) as Pick<BudgetRecord, F>;
}

/** What createRun writes as a new run's hash: every field a string (Lua's cjson would turn numbers into doubles). */
export function newRunRecord(
  fields: Pick<
    RunRecord,
    'tenant' | 'agent' | 'key' | 'createdAt' | 'updatedAt' | 'agentVersion' | 'toolsHash' | 'model' | 'jobId'
  > & { spec: string; search?: Readonly<Record<string, string>> | undefined; searchKeys?: readonly string[] },
): Record<string, string> {
  const { tenant, agent, key, createdAt, updatedAt, agentVersion, toolsHash, model, jobId, spec } = fields;
  const searchKeys = fields.searchKeys?.length ? { searchKeys: JSON.stringify(fields.searchKeys) } : {};
  const search =
    fields.search && Object.keys(fields.search).length > 0 ? { search: JSON.stringify(fields.search) } : {};
  const record: Partial<Record<RunField, string | number>> = {
    status: 'queued',
    reason: '',
    cursor: 1,
    tenant,
    agent,
    key,
    createdAt,
    updatedAt,
    agentVersion,
    toolsHash,
    model,
    decidedStep: 0,
    jobId,
    spec,
    ...search,
    ...searchKeys,
  };
  return Object.fromEntries(Object.entries(record).map(([f, v]) => [f, String(v)]));
}
