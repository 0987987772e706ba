/**
 * Errors say what a retry should do. The step processor translates them at the
 * edge into BullMQ control flow (see src/worker/stepProcessor.ts).
 */
export type ErrorCode =
  | 'lock_lost'
  | 'stale_step'
  | 'run_missing'
  | 'run_not_running'
  | 'run_cancelled'
  | 'decision_exists'
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
  | 'idempotency_conflict';

export class AgentError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** Another owner moved the run on: do nothing more for this job (it is stale). */
export class FenceError extends AgentError {}

/** The run's cancel is recorded: the move was refused and nothing was dispatched. */
export class CancelledError extends AgentError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super('run_cancelled', message, details);
  }
}

/** Never retry: the run ends (failed / budget_exceeded) with this reason. */
export class TerminalError extends AgentError {}

/** Safe to retry in code (nothing left the process), with backoff. */
export class RetryableError extends AgentError {
  constructor(message: string, readonly retryAfterMs?: number, details: Record<string, unknown> = {}) {
    super('transient', message, details);
  }
}

/**
 * The service holds this Idempotency-Key for a different request (same key, other body): never
 * retried, the action stops and goes to a person (a conflict to surface, not a transient).
 */
export class KeyConflictError extends AgentError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super('idempotency_conflict', message, details);
  }
}

/** The worker is shutting down: the job is handed back to the queue. */
export class ShutdownError extends AgentError {
  constructor() {
    super('shutting_down', 'worker is shutting down');
  }
}

/**
 * A step job whose data, or whose run's stored spec, no longer parses: no retry
 * can help. The worker fails the job at once (BullMQ's UnrecoverableError) and
 * the run ends `failed` with reason `<code>: <field>` (src/runs/stuckRuns.ts).
 */
export class InvalidStepInput extends AgentError {
  constructor(code: 'invalid_job_data' | 'invalid_spec', readonly field: string, options?: { cause?: unknown }) {
    super(code, `${code}: ${field}`);
    if (options?.cause !== undefined) (this as { cause?: unknown }).cause = options.cause;
  }
}

/** A bounded code for any error (for reasons and metric labels): its snake_case `code`, else its class name. */
export function errorCode(err: unknown): string {
  const code = (err as { code?: unknown } | undefined)?.code;
  if (typeof code === 'string' && /^[a-z][a-z0-9_]{0,39}$/.test(code)) return code;
  const name = (err as Error | undefined)?.name ?? '';
  return /^[A-Za-z]\w{0,39}$/.test(name) ? name : 'error';
}
