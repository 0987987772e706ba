/**
 * One error hierarchy: every error the code raises for a condition a caller
 * branches on is an AgentError with a stable snake_case `code` (for reasons,
 * metric labels and log lines) and a `retry` that says what a retry should do.
 * Constructors take ES2022 ErrorOptions (`{ cause }`): a wrap-and-rethrow keeps
 * the error it wraps, and pino serializes the chain.
 *
 * The step processor translates these at the edge into BullMQ control flow
 * (src/worker/step/pipeline.ts, src/worker/fleetWorker.ts).
 */
export type ErrorCode =
  | 'lock_lost'
  | 'stale_step'
  | 'run_missing'
  | 'run_not_running'
  | 'run_cancelled'
  | 'decision_exists'
  | 'decision_not_journalled'
  | 'budget_exceeded'
  | 'missing_usage'
  | 'model_failed'
  | 'transient'
  | 'invalid_input'
  | 'determinism'
  | 'version_mismatch'
  | 'ledger_conflict'
  | 'illegal_transition'
  | 'action_missing'
  | 'shutting_down'
  | 'invalid_job_data'
  | 'invalid_spec'
  | 'timeout'
  | 'deadline'
  | 'invalid_usage'
  | 'journal_corrupt'
  | 'compensation_refused'
  | 'config_invalid'
  | 'redis_unreachable'
  | 'redis_misconfigured'
  | 'port_in_use'
  | 'internals_changed'
  | 'script_failed'
  | 'invalid_value'
  | 'invariant'
  | 'idempotency_conflict'
  | 'agents_module_invalid'
  | 'budget_exhausted'
  | 'action_waiting'
  | 'rate_limited'
  | 'not_replicated'
  | 'run_superseded'
  | 'parent_moved_on'
  | 'run_erased';

/**
 * What a retry should do with an error:
 * - `terminal`: never retry; the run ends with the error's code as its reason.
 * - `retryable`: nothing left the process (429, 503, refused): retry in code with backoff
 *   (RetryableError.retryAfterMs).
 * - `outcome_unknown`: a request may have left the process: reconcile before any retry, never re-send blindly.
 * - `redeliver`: this delivery failed; the job's attempts decide (BullMQ redelivers it).
 * - `fenced`: another owner moved the run on: do nothing more for this job.
 * - `cancelled`: the run's cancel is recorded: stop, dispatch nothing.
 * - `shutdown`: the process is stopping: hand the job back, it is not an attempt.
 */
export type RetryKind =
  'terminal' | 'retryable' | 'outcome_unknown' | 'redeliver' | 'fenced' | 'cancelled' | 'shutdown';

export class AgentError extends Error {
  /** What a retry should do (see RetryKind). A plain AgentError fails the delivery: the job's attempts decide. */
  readonly retry: RetryKind = 'redeliver';

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Another owner moved the run on: do nothing more for this job (it is stale). */
export class FenceError extends AgentError {
  override readonly retry: RetryKind = 'fenced';
}

/** The run's cancel is recorded: the move was refused and nothing was dispatched. */
export class CancelledError extends AgentError {
  override readonly retry: RetryKind = 'cancelled';
  constructor(message: string, details: Record<string, unknown> = {}, options?: ErrorOptions) {
    super('run_cancelled', message, details, options);
  }
}

/** Never retry: the run ends (failed / budget_exceeded) with this reason. */
export class TerminalError extends AgentError {
  override readonly retry: RetryKind = 'terminal';
}

/** Safe to retry in code (nothing left the process), with backoff; `retryAfterMs`: the service's Retry-After. */
export class RetryableError extends AgentError {
  override readonly retry: RetryKind = 'retryable';
  constructor(
    message: string,
    readonly retryAfterMs?: number,
    details: Record<string, unknown> = {},
    options?: ErrorOptions,
  ) {
    super('transient', message, details, options);
  }
}

/**
 * The request may have reached the service (timeout, reset, 5xx after send,
 * malformed answer): the ledger reconciles it before anything is sent again.
 */
export class OutcomeUnknownError extends AgentError {
  override readonly retry: RetryKind = 'outcome_unknown';
  constructor(message: string, details: Record<string, unknown> = {}, options?: ErrorOptions) {
    super('transient', message, details, options);
  }
}

/**
 * The service holds this Idempotency-Key for a different request (same key, other body): never
 * retried, the action stops and goes to a person (a conflict to surface, not a transient).
 */
export class KeyConflictError extends AgentError {
  override readonly retry: RetryKind = 'terminal';
  constructor(message: string, details: Record<string, unknown> = {}, options?: ErrorOptions) {
    super('idempotency_conflict', message, details, options);
  }
}

/** The worker is shutting down: the job is handed back to the queue. */
export class ShutdownError extends AgentError {
  override readonly retry: RetryKind = 'shutdown';
  constructor(options?: ErrorOptions) {
    super('shutting_down', 'worker is shutting down', {}, options);
  }
}

/**
 * A step job whose data, or whose run's stored spec, no longer parses: no retry
 * can help. The worker fails the job at once (BullMQ's UnrecoverableError) and
 * the run ends `failed` with reason `<code>: <field>` (src/runs/stuckRuns.ts).
 */
export class InvalidStepInput extends AgentError {
  override readonly retry: RetryKind = 'terminal';
  constructor(
    code: 'invalid_job_data' | 'invalid_spec',
    readonly field: string,
    options?: ErrorOptions,
  ) {
    super(code, `${code}: ${field}`, {}, options);
  }
}

/**
 * Something this process depends on does not hold (a BullMQ internal moved, a
 * script is unknown, a value cannot be encoded): a bug or an upgrade to look
 * at, never retried.
 */
export class InvariantError extends AgentError {
  override readonly retry: RetryKind = 'terminal';
}

const RETRY_KINDS: ReadonlySet<string> = new Set<RetryKind>([
  'terminal',
  'retryable',
  'outcome_unknown',
  'redeliver',
  'fenced',
  'cancelled',
  'shutdown',
]);

/**
 * Whether `err` is one of the engine's errors, recognised by its `code` and `retry`, not by its class: an agents
 * module that resolved its own copy of the package (another path, another version) throws errors of other
 * classes with the same meaning. The classes stay for raising; deciding goes through these guards.
 */
export function isAgentError(err: unknown): err is AgentError {
  if (err instanceof AgentError) return true;
  if (!(err instanceof Error)) return false;
  const { code, retry } = err as { code?: unknown; retry?: unknown };
  return typeof code === 'string' && typeof retry === 'string' && RETRY_KINDS.has(retry);
}

/** Whether a retry of `err` may run again in code now (after backoff): a RetryableError, by its `retry`. */
export function isRetryable(err: unknown): err is RetryableError {
  return isAgentError(err) && err.retry === 'retryable';
}

/** Whether the request may have reached the service (an OutcomeUnknownError, by its `retry`): reconcile first. */
export function isOutcomeUnknown(err: unknown): err is OutcomeUnknownError {
  return isAgentError(err) && err.retry === 'outcome_unknown';
}

/** Whether the service holds the key for another request (a KeyConflictError, by its `code`). */
export function isKeyConflict(err: unknown): err is KeyConflictError {
  return isAgentError(err) && err.code === 'idempotency_conflict';
}

/** Whether `err` is the engine's error with this `code` (e.g. `invalid_input`: the service refused the request). */
export function hasErrorCode(err: unknown, code: ErrorCode): err is AgentError {
  return isAgentError(err) && err.code === code;
}

/** What a retry should do with any error: its `retry`, else `redeliver` (an unknown error fails the delivery). */
export function retryKindOf(err: unknown): RetryKind {
  return isAgentError(err) ? err.retry : 'redeliver';
}

/** A bounded code for any error (for reasons and metric labels): its snake_case `code`, else its class name. */
export function errorCode(err: unknown): string {
  const code = (err as { code?: unknown } | undefined)?.code;
  if (typeof code === 'string' && /^[a-z][a-z0-9_]{0,39}$/.test(code)) return code;
  const name = (err as Error | undefined)?.name ?? '';
  return /^[A-Za-z]\w{0,39}$/.test(name) ? name : 'error';
}

/** Bad configuration: boot stops with the fields named (never retried). */
export class ConfigError extends TerminalError {
  constructor(
    readonly fields: string[],
    message: string,
  ) {
    super('config_invalid', message, { fields });
  }
}

/**
 * The keys of an error's `details` (AgentError) that a log line and a ledger move's evidence keep: what the engine's errors, the vendor adapters and
 * the MCP tools put there, codes, statuses, ids, names and numbers, none of them customer text (src/core/httpJson.ts,
 * src/agents/support/vendors/errors.ts, src/store/codes.ts' contexts, src/mcp/, src/models/, the timeouts, budgets,
 * replication and rate waits). Every other key is dropped: a tool's error may carry a service's answer (`body`, an
 * email, the customer's words) under a name of its own.
 */
const CODED_DETAILS: ReadonlySet<string> = new Set([
  // HTTP and vendor answers, as codes
  'status',
  'code',
  'reason',
  'vendor',
  'tool',
  'server',
  // ids and the engine's own states (a ledger move's, a run's)
  'runId',
  'actionId',
  'laterRunId',
  'runKey',
  'step',
  'attempt',
  'from',
  'to',
  'expected',
  'actual',
  'cancelReason',
  'kind',
  // bounds and waits
  'timeoutMs',
  'deadlineAt',
  'bucket',
  'waitMs',
  'acked',
  'required',
  'usage',
  // configuration and input problems, by name and path only
  'fields',
  'issues',
  'module',
  'port',
  'setting',
]);

/**
 * A string kept under one of those keys: a code, a state, an id, a name. A tool's own error may use the same names for
 * other things (`to`: the recipient, `reason`: the service's sentence), so text with a space or an address is dropped
 * whatever its key.
 */
const CODED_STRING = /^[^\s@]{0,200}$/;

/** Whether `v` is a string CODED_STRING keeps: a code, a state, an id, a name. */
export function isCodedString(v: unknown): v is string {
  return typeof v === 'string' && CODED_STRING.test(v);
}

/** Whether codedDetails keeps this key and value: a key CODED_DETAILS names, and of a string a coded one. */
export function isCodedField(key: string, value: unknown): boolean {
  return CODED_DETAILS.has(key) && (typeof value !== 'string' || CODED_STRING.test(value));
}

/** An error's details with the keys CODED_DETAILS names only, and of their strings the coded ones. */
export function codedDetails(details: object): Record<string, unknown> {
  return Object.fromEntries(Object.entries(details).filter(([k, v]) => isCodedField(k, v)));
}
