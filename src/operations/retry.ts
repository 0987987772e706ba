/**
 * Retry a stopped run from its last commit (src/runs/retryRun.ts), recorded under the actor's name; the run takes its
 * flow-control slot again. Each refusal says what must happen first.
 */
import type { EngineContext } from '../runs/engineContext.js';
import { holdSlot } from '../runs/resume.js';
import { retryRun, type RetryExtension, type RetryOutcome } from '../runs/retryRun.js';
import { isRunId } from '../store/keys.js';
import { actorSeesRun, type Actor } from './actor.js';
import { done, NO_RUN, refused, type Outcome } from './outcome.js';

type Retried = Extract<RetryOutcome, { ok: true }>;
type NotRetried = Extract<RetryOutcome, { ok: false }>;

export async function retryStoppedRun(
  ctx: EngineContext,
  actor: Actor,
  runId: string,
  ext: RetryExtension,
): Promise<Outcome<Record<string, unknown>>> {
  if (!isRunId(runId) || !(await actorSeesRun(ctx, actor, runId))) return NO_RUN;
  const r = await retryRun(ctx, runId, actor.name, ext);
  if (!r.ok) return refusalOf(runId, r);
  await holdSlot(ctx, runId);
  return done(retried(runId, r, actor.name));
}

function retried(runId: string, r: Retried, by: string) {
  return {
    runId,
    status: 'running',
    from: r.from,
    step: r.step,
    jobId: r.jobId,
    limits: r.limits,
    extension: r.extension,
    operator: by,
  };
}

/** Each reason a retry is refused, with what the operator should do about it. */
function refusalOf<T extends object>(runId: string, r: NotRetried): Outcome<T> {
  switch (r.code) {
    case 'run_missing':
      return NO_RUN;
    case 'not_retryable':
      return refused(r.code, {
        runId,
        status: r.status,
        message: `the run is ${r.status}: only failed, budget_exceeded or needs_human runs are retried`,
      });
    case 'version_mismatch':
      return refused(r.code, {
        runId,
        status: r.status,
        message:
          'the run is pinned to another agent version: a retry would park it again (continue or cancel it instead)',
      });
    case 'approval_expired':
      return refused(r.code, {
        runId,
        status: r.status,
        message: 'its approval expired, which is final: a retry would fail again',
      });
    case 'moved_on':
      return refused(r.code, { runId, message: 'the run changed while the retry was prepared: look again' });
    case 'extension_required':
      return refused(r.code, {
        runId,
        budget: r.budget,
        message: `the run stopped on its ${r.budget} budget: a retry needs more of it (${r.budget === 'wall_clock' ? 'wallMs' : r.budget})`,
      });
    case 'budget_exhausted':
      return refused(r.code, {
        runId,
        budget: r.budget,
        message: `the run's ${r.budget} budget leaves no room: it would stop again at once`,
      });
    case 'tenant_budget_exhausted':
      return refused(r.code, {
        runId,
        message: "the tenant's daily token budget is used up: the run would stop again at once",
      });
    case 'action_waiting':
      if (r.compensation === 'settled')
        return refused('run_compensated', {
          runId,
          actionId: r.actionId,
          message:
            'an action of the run was compensated, or its effect accepted, by an operator: the run does not go on ' +
            'after it (a person has taken the case over; start a new run if the work must continue)',
        });
      if (r.compensation === 'pending')
        return refused(r.code, {
          runId,
          actionId: r.actionId,
          compensationPending: true,
          message:
            "a compensation of this action is pending: once confirmed it ends the run (the reconciler's sweep sends " +
            'one not sent yet); one its service refused is closed by the finding accept',
        });
      return refused(r.code, {
        runId,
        actionId: r.actionId,
        message:
          'an action of the run waits for a person: resolve it or decide its approval first (that resumes the run)',
      });
    case 'superseded':
      return refused('run_superseded', {
        runId,
        laterRunId: r.laterRunId,
        message: `a later run of the subject (${r.laterRunId}) superseded this one: only the latest run goes on`,
      });
    case 'parent_moved_on':
      return refused('parent_moved_on', {
        runId,
        parentRunId: r.parentRunId,
        parentStatus: r.parentStatus,
        message:
          `its parent run ${r.parentRunId} took this child's outcome and moved on (${r.parentStatus}): the child ` +
          "would spend outside the parent's budget, charged to nobody",
      });
    case 'invalid_spec':
      return refused('invalid_spec', {
        runId,
        field: r.field,
        message: `the run's stored spec no longer parses (${r.field}): no step could run it; cancel it`,
      });
    case 'run_erased':
      return refused('run_erased', {
        runId,
        message:
          "the run's customer text was erased and its step would act again on its decision, whose tool calls' " +
          'arguments the erasure replaced: start a new run if the work must continue',
      });
    case 'no_money_budget':
      return refused('invalid_request', {
        fields: [{ path: 'cost', message: 'the run has no money budget (maxCost) to raise' }],
      });
    case 'over_limit':
      return refused('invalid_request', {
        fields: [{ path: r.field, message: `the run's total would pass this deployment's limit of ${r.limit}` }],
      });
  }
}
