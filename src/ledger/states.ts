/**
 * The effect ledger's state machine. Moves only forward, by compare-and-set
 * (src/store/lua/ledgerTransition-6.lua holds the same table; test/integration/ledgerStates.test.ts
 * proves every move not listed here is refused by the script).
 */
export const LEDGER_STATES = [
  'planned',
  'authorized',
  'dispatched',
  'confirmed',
  'outcome_unknown',
  'safe_retry',
  'compensation_required',
  'needs_human',
  'rejected',
] as const;
export type LedgerState = (typeof LEDGER_STATES)[number];

export const ALLOWED_MOVES: Readonly<Record<LedgerState, readonly LedgerState[]>> = {
  planned: ['authorized', 'rejected'],
  // -> rejected: never sent, and never will be (the run's cancel refused the dispatch).
  authorized: ['dispatched', 'rejected'],
  dispatched: ['confirmed', 'outcome_unknown'],
  outcome_unknown: ['confirmed', 'safe_retry', 'compensation_required', 'needs_human'],
  safe_retry: ['dispatched', 'rejected'],
  needs_human: ['confirmed', 'safe_retry', 'compensation_required'],
  compensation_required: [],
  confirmed: [],
  rejected: [],
};

export function isAllowedMove(from: LedgerState, to: LedgerState): boolean {
  return ALLOWED_MOVES[from].includes(to);
}

/** States in which the action may have left the process and is not settled. */
export const OPEN_STATES: ReadonlySet<LedgerState> = new Set(['dispatched', 'outcome_unknown']);

/**
 * States an action has not settled in: it may still be sent, its outcome is not known, or a person must find it. Its
 * arguments are what sends it or what a person looks for at the service (an erasure waits for it to settle).
 */
export const UNSETTLED_STATES: ReadonlySet<LedgerState> = new Set([
  'planned',
  'authorized',
  'dispatched',
  'outcome_unknown',
  'safe_retry',
  'needs_human',
]);

/**
 * The unsettled states in which nothing has left the process (planned, authorized), or nothing did and that is proven
 * (safe_retry: every attempt failed before its request left). Each may move to `rejected` (ALLOWED_MOVES): on an ended
 * run nothing sends such an action but a retry, so an erasure of its customer settles it there itself, `rejected`
 * (src/archive/erasure.ts), where it refuses the others (a person must look the effect up at the service).
 */
export const NEVER_SENT_STATES: ReadonlySet<LedgerState> = new Set(['planned', 'authorized', 'safe_retry']);
