/**
 * What a run operation answers: done (it took effect), accepted (it will take effect: a running run's cancel at its
 * next commit, a compensation another request is driving), or refused with a code and the facts the caller needs
 * (the run's status, the later run that superseded it, the field past a limit). Operations never speak HTTP: the
 * HTTP layer maps a refusal's code to a status in one table (src/http/operators/answers.ts).
 */
export type Refusal =
  /** No such run or action, or one the actor may not see (the same answer: nothing leaks across tenants). */
  | 'not_found'
  /** A request field is past what the deployment allows (`details.fields` names it). */
  | 'invalid_request'
  | 'not_pending'
  | 'fingerprint_mismatch'
  | 'run_finished'
  | 'run_superseded'
  /** A child run whose parent took its outcome and moved on: it is not put back to work (`parentRunId`). */
  | 'parent_moved_on'
  /**
   * A run whose stored spec no longer parses (`field` names where): no step could run it, so it is not put back to
   * work (a decision on it is void and it ends `failed` / `invalid_spec: <field>`).
   */
  | 'invalid_spec'
  | 'approval_expired'
  | 'not_in_human_queue'
  | 'compensation_refused'
  /** `accept` on an action whose compensation was not refused by its service (or that has none). */
  | 'compensation_not_refused'
  | 'not_retryable'
  | 'version_mismatch'
  | 'moved_on'
  | 'extension_required'
  | 'budget_exhausted'
  | 'tenant_budget_exhausted'
  | 'action_waiting'
  /** A retry of a run one of whose actions was compensated or accepted: it does not go on after that. */
  | 'run_compensated'
  /** A retry of an erased run whose step would act again on the decision the erasure rewrote. */
  | 'run_erased'
  | 'not_version_parked'
  | 'version_not_served'
  | 'no_served_version'
  | 'ambiguous_version'
  | 'unsettled_actions_of_vanished_tools';

export type Outcome<T extends object> =
  | { readonly kind: 'done'; readonly value: T }
  | { readonly kind: 'accepted'; readonly value: T }
  | { readonly kind: 'refused'; readonly refusal: Refusal; readonly details: Record<string, unknown> };

export const done = <T extends object>(value: T): Outcome<T> => ({ kind: 'done', value });
export const accepted = <T extends object>(value: T): Outcome<T> => ({ kind: 'accepted', value });
export const refused = <T extends object = never>(
  refusal: Refusal,
  details: Record<string, unknown> = {},
): Outcome<T> => ({ kind: 'refused', refusal, details });

export const NO_RUN = refused('not_found', { message: 'no such run' });
export const NO_ACTION = refused('not_found', { message: 'no such action' });
