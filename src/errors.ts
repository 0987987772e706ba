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
  | 'shutting_down';

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

/** The worker is shutting down: the job is handed back to the queue. */
export class ShutdownError extends AgentError {
  constructor() {
    super('shutting_down', 'worker is shutting down');
  }
}
