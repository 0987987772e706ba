/**
 * A run's status: the one list, the one terminal set, the one isTerminal().
 * The Lua scripts read the terminal set from src/store/lua/includes/runStatus.lua,
 * which test/unit/status.test.ts holds equal to TERMINAL_STATUSES.
 *
 *   queued -> running -> (waiting_approval | sleeping | waiting_event | waiting_child -> running)*
 *          -> completed | failed | budget_exceeded | cancelled
 *   any non-terminal -> needs_human (a person decides; it may resume) or cancelled
 *   sleeping: a wait tool's sleep, until a time; waiting_event: a wait tool's wait for an event on a key
 *   (src/runs/waits.ts); waiting_child: an agent tool's child run, until it ends (src/runs/children.ts); all three
 *   hold no worker (the next step is a delayed job) and are cancellable.
 */
export const RUN_STATUSES = [
  'queued',
  'running',
  'waiting_approval',
  'sleeping',
  'waiting_event',
  'waiting_child',
  'needs_human',
  'completed',
  'failed',
  'budget_exceeded',
  'cancelled',
] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

/** The statuses a run never leaves: its keys get their retention TTL, a decision for it authorises nothing. */
export const TERMINAL_STATUSES = [
  'completed',
  'failed',
  'budget_exceeded',
  'cancelled',
] as const satisfies readonly RunStatus[];
export type TerminalStatus = (typeof TERMINAL_STATUSES)[number];

const terminal: ReadonlySet<string> = new Set(TERMINAL_STATUSES);
const known: ReadonlySet<string> = new Set(RUN_STATUSES);

export function isRunStatus(status: unknown): status is RunStatus {
  return typeof status === 'string' && known.has(status);
}

/** Whether the run has ended for good (`needs_human` and `waiting_approval` have not: a person may resume them). */
export function isTerminal(status: string | null | undefined): status is TerminalStatus {
  return typeof status === 'string' && terminal.has(status);
}

/** Whether a move to `status` counts as a run's end in agent_runs_finished_total: terminal, or handed to a person. */
export function endsRun(status: string): boolean {
  return isTerminal(status) || status === 'needs_human';
}
