/**
 * The one table from a run operation's outcome (src/operations) to an HTTP answer: done is 200, accepted 202, and each
 * refusal its status, with the refusal's code as the body's `error` beside the facts it carries.
 */
import type { Outcome, Refusal } from '../../operations/outcome.js';

export interface ActionAnswer {
  status: number;
  body: Record<string, unknown>;
}

const STATUS_OF: Record<Refusal, number> = {
  not_found: 404,
  invalid_request: 400,
  not_pending: 409,
  fingerprint_mismatch: 409,
  run_finished: 409,
  run_superseded: 409,
  parent_moved_on: 409,
  invalid_spec: 409,
  approval_expired: 409,
  not_in_human_queue: 409,
  compensation_refused: 409,
  compensation_not_refused: 409,
  not_retryable: 409,
  version_mismatch: 409,
  moved_on: 409,
  extension_required: 409,
  budget_exhausted: 409,
  tenant_budget_exhausted: 409,
  action_waiting: 409,
  run_compensated: 409,
  run_erased: 409,
  not_version_parked: 409,
  version_not_served: 409,
  no_served_version: 409,
  ambiguous_version: 409,
  unsettled_actions_of_vanished_tools: 409,
};

export function answerOf(outcome: Outcome<object>): ActionAnswer {
  switch (outcome.kind) {
    case 'done':
      return { status: 200, body: { ...outcome.value } };
    case 'accepted':
      return { status: 202, body: { ...outcome.value } };
    case 'refused':
      return { status: STATUS_OF[outcome.refusal], body: { error: outcome.refusal, ...outcome.details } };
  }
}
