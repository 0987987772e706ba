/**
 * Retry a stopped run (`failed`, `budget_exceeded`, `needs_human`) from its last
 * commit, on an operator's request, optionally with more steps, tokens, wall
 * clock or money (µ$): src/store/lua/retryRun-17.lua, one atomic change (status, limits, the
 * operator's journal entry, events, index, the step's new job, an ended run's packed journal unpacked).
 *
 * Nothing done is done again: the ledger is not touched, and the step re-runs
 * through it (a journalled decision is reused, a confirmed effect answers from
 * its record, an unsettled one is reconciled). What is refused, with nothing
 * written, and why:
 * - another status (409): only those three stop a run that may go on;
 * - `version_mismatch`: the step re-checks the pinned versions and parks again
 *   (the version queue's continue or cancel decides such a run);
 * - `approval_expired`: an expired approval is final, the re-run step fails again;
 * - a `budget_exceeded` run without an extension of the budget that stopped it, and
 *   any run whose limits leave no room (steps or tokens used up, deadline passed):
 *   it would stop again at once;
 * - the tenant's day budget used up (TENANT_DAILY_TOKENS): the first model call would stop;
 * - an action waiting for a person (human queue, pending approval): resolve it first
 *   (resolving resumes the run by itself); or an action whose compensation is pending (its
 *   original still in the human queue, compensation_required): the compensation ends the run
 *   once confirmed, and a run put back to work meanwhile would be at work when it lands;
 * - a run with an action compensated or accepted by an operator (compensation_required, settled):
 *   a person took the case over, and its step would find the action and park with nothing queued;
 * - a run a later run of its subject superseded (409 naming it): one run at work per
 *   subject, and the later run already answered the subject's newer event; going on
 *   with the earlier one would act on a stale view next to it (includes/subject.lua);
 * - totals past the deployment's LIMIT_MAX_* (400 naming the field);
 * - more money for a run that has no money budget (400 naming `cost`): it has no cap to raise.
 * - an erased run (src/archive/erasure.ts) whose step to run has its decision journalled (409 `run_erased`): the step
 *   would act on that decision again, its tool calls' arguments replaced by the erasure's marker, so a write the run
 *   never settled (which the erasure rejected) would go out as another action with the marker for arguments. An
 *   erased run whose last step committed goes on from the next one.
 * - a child run whose parent took its outcome and moved on (409 `parent_moved_on` naming the parent,
 *   src/runs/children.ts parentMovedOn): the parent's wake charged what the child had spent then, and the child
 *   would spend again from the limits carved out of what the parent had left before it spent more, charged to
 *   nobody. Allowed while the parent still waits on the child (`waiting_child` on it) and its wake has not taken
 *   the child's outcome (the child's mark, checked by the script): the wake charges all the child spends, the
 *   retried run's included.
 * - a run whose stored spec no longer parses (409 `invalid_spec` naming the field): its step would end it `failed` /
 *   `invalid_spec` at once, and whether it is a child whose parent moved on cannot be read.
 *
 * If the process dies before the script, nothing happened; after it, the run
 * is running with its job: the retry is whole or absent.
 */
import { reasonCode } from '../metrics/metrics.js';
import type { OperatorEntry } from '../core/journal.js';
import { captureAddStandardJob } from '../store/bullmqInternals.js';
import { stepJobId } from '../store/keys.js';
import { retryRunCall, type RetryRunArgs } from '../store/calls/retryRun.js';
import { readPackedJournal } from '../store/runJournal.js';
import type { EngineContext } from './engineContext.js';
import { STEP_JOB_NAME } from '../store/queues.js';
import { LIMIT_FIELDS, limitsOfBudget, type RunLimits, type StepJobData } from './spec.js';
import { readBudget, readRun } from '../store/runRecord.js';

export const RETRYABLE_STATUSES = ['failed', 'budget_exceeded', 'needs_human'] as const;

/** Extra budget granted by the retry (each >= 0; 0 or absent = none). */
export interface RetryExtension {
  steps?: number;
  tokens?: number;
  /**
   * More wall clock: the new deadline is this much after the old one, or after now when
   * the old one has passed; the run's maxWallMs (the wall clock granted in all) grows by it.
   */
  wallMs?: number;
  /** More money in µ$: the run's maxCost grows by it (a run without a money budget has none to raise). */
  cost?: number;
}

export type RetryOutcome =
  | {
      ok: true;
      runId: string;
      from: string;
      reason: string;
      step: number;
      jobId: string;
      limits: RunLimits;
      extension: Required<RetryExtension>;
    }
  | { ok: false; code: 'run_missing' }
  | { ok: false; code: 'not_retryable'; status: string }
  | { ok: false; code: 'version_mismatch' | 'approval_expired' | 'moved_on'; status: string }
  | { ok: false; code: 'extension_required'; budget: string }
  | { ok: false; code: 'budget_exhausted'; budget: string }
  | { ok: false; code: 'tenant_budget_exhausted'; tenant: string }
  | { ok: false; code: 'action_waiting'; actionId: string; compensation?: 'pending' | 'settled' }
  | { ok: false; code: 'superseded'; laterRunId: string }
  | { ok: false; code: 'run_erased' }
  | { ok: false; code: 'parent_moved_on'; parentRunId: string; parentStatus: string }
  | { ok: false; code: 'invalid_spec'; field: string }
  | { ok: false; code: 'over_limit'; field: 'steps' | 'tokens' | 'wallMs' | 'cost'; limit: number }
  | { ok: false; code: 'no_money_budget' };

const EXTENDABLE: Record<string, keyof RetryExtension> = {
  steps: 'steps',
  tokens: 'tokens',
  wall_clock: 'wallMs',
  cost: 'cost',
};

/**
 * The run's own money cap stopped it (src/budget/policy.ts costCheck). A tenant's, agent's or fleet's money limit
 * stops with a reason of the same code that names the counter instead (src/budget/spend.ts): the run's maxCost is not
 * what a retry must raise then.
 */
const OWN_COST_STOP = /^cost: used \d+ \+ estimate \d+ > cap \d+/;

/** `by`: the authenticated operator's name (recorded in the journal and the event). */
export async function retryRun(
  ctx: EngineContext,
  runId: string,
  by: string,
  ext: RetryExtension,
  now = Date.now(),
): Promise<RetryOutcome> {
  const k = ctx.keys.run(runId);
  const [run, budget] = await Promise.all([
    readRun(ctx.redis, ctx.keys, runId, ['reason', 'cursor', 'resumes', 'tenant']),
    readBudget(ctx.redis, ctx.keys, runId, [...LIMIT_FIELDS, 'extensions']),
  ]);
  if (!run) {
    ctx.metrics.runRetries.inc({ from: 'none', reason: 'none', outcome: 'run_missing' });
    return { ok: false, code: 'run_missing' };
  }
  const { status, reason: reasonText, cursor, resumes, tenant } = run;
  const count = (outcomeCode: string) =>
    ctx.metrics.runRetries.inc({ from: status, reason: reasonCode(reasonText), outcome: outcomeCode });
  const refuse = <T extends Refusal>(r: T): T => {
    count(r.code);
    ctx.log.info({ code: 'retry_refused', runId, refusal: r.code, from: status, operator: by }, 'retry refused');
    return r;
  };

  const { extensions, ...held } = budget;
  const plan = planRetry({ status, reason: reasonText }, limitsOfBudget(held), ext, now, ctx.cfg);
  if (!plan.ok) return refuse(plan);
  const { limits, extension } = plan;
  // The parent lives on another shard (its own Cluster slot), so retryRun-17.lua cannot read it: it is read here,
  // before the script. A parent `waiting_child` on this child whose wake takes the child's outcome between this read
  // and the script is caught by the script: the wake marks the child on its own slot before it commits
  // (takeChildOutcome-1.lua), and the script refuses a marked child.
  const bar = await ctx.store.parentBar(runId);
  if (bar && 'unreadableSpec' in bar) {
    ctx.log.warn({ code: 'spec_unreadable', runId, field: bar.unreadableSpec, operator: by }, 'retry: spec unreadable');
    return refuse({ ok: false, code: 'invalid_spec', field: bar.unreadableSpec });
  }
  if (bar) return refuse({ ok: false, code: 'parent_moved_on', ...bar });
  const dayUsed = await tenantDayUsed(ctx, tenant, now);
  if (dayUsed !== undefined && dayUsed >= ctx.cfg.TENANT_DAILY_TOKENS)
    return refuse({ ok: false, code: 'tenant_budget_exhausted', tenant });

  const extended = extension.steps + extension.tokens + extension.wallMs + extension.cost > 0;
  // Limits ride in the job once any retry extended them; the spec's hold otherwise.
  const carryLimits = extended || extensions > 0;
  const jobId = `${stepJobId(runId, cursor)}.r${resumes + 1}`;
  const state = await ctx.store.readState(runId);
  if (!state) return refuse({ ok: false, code: 'run_missing' });
  const { used } = state;
  const data: StepJobData = { v: 1, runId, step: cursor, used, resume: true, ...(carryLimits ? { limits } : {}) };
  const job = captureAddStandardJob(ctx.queues.forRun(runId), STEP_JOB_NAME, data, {
    ...ctx.queues.jobOptions(runId, cursor),
    jobId,
  });
  // Money is named only when the retry adds some (the entries of earlier retries read as they did).
  const detail = `from=${status},steps=+${extension.steps},tokens=+${extension.tokens},wall_ms=+${extension.wallMs}${extension.cost > 0 ? `,cost=+${extension.cost}` : ''}`;
  const entry: OperatorEntry = { v: 1, kind: 'operator', step: cursor, action: 'retry', by, at: now, detail };
  const keys = {
    ...k,
    subjectLatest: await ctx.store.subjectLatestOf(runId),
    humanQueue: ctx.keys.humanQueue(ctx.keys.shardOf(runId)),
  };
  const retry = (packedJournal: RetryRunArgs['packedJournal']) =>
    retryRunCall(ctx.redis, keys, {
      runId,
      expected: { status, cursor, resumes },
      jobId,
      now,
      eventsMaxLen: ctx.cfg.EVENTS_MAX_LEN,
      limits,
      extended,
      entry: JSON.stringify(entry),
      retriedEvent: JSON.stringify({
        from: status,
        reason: reasonCode(reasonText),
        by,
        step: cursor,
        jobId,
        extension,
        limits,
      }),
      statusEvent: JSON.stringify({ status: 'running', reason: 'retried', from: status }),
      job,
      packedJournal,
    });
  // An ended run's journal may be packed (src/runs/compact.ts): the script unpacks what was read here. A compaction
  // landing between the read and the script (it follows the commit that ended the run) is read again, once.
  const packed = await readPackedJournal(ctx.redis, k);
  let r = await retry(packed);
  if (r.outcome === 'moved_on') {
    const again = await readPackedJournal(ctx.redis, k);
    if (again.sha1 !== packed.sha1) r = await retry(again);
  }
  switch (r.outcome) {
    case 'retried':
      count('retried');
      ctx.log.info(
        { code: 'run_retried', runId, from: status, step: cursor, jobId, operator: by, extended },
        'run retried',
      );
      return { ok: true, runId, from: status, reason: reasonText, step: cursor, jobId, limits, extension };
    case 'wrong_status':
      return refuse({ ok: false, code: 'not_retryable', status: r.status });
    case 'moved_on':
      return refuse({ ok: false, code: 'moved_on', status });
    case 'budget_exhausted':
      return refuse({ ok: false, code: 'budget_exhausted', budget: r.budget });
    case 'action_waiting':
      return refuse({
        ok: false,
        code: 'action_waiting',
        actionId: r.actionId,
        ...(r.compensation ? { compensation: r.compensation } : {}),
      });
    case 'superseded':
      ctx.metrics.runsSuperseded.inc({ path: 'retry' });
      return refuse({ ok: false, code: 'superseded', laterRunId: r.laterRunId });
    case 'run_erased':
      return refuse({ ok: false, code: 'run_erased' });
    case 'parent_moved_on': {
      const parentStatus = await ctx.store.parentStatusOf(r.parentRunId);
      return refuse({ ok: false, code: 'parent_moved_on', parentRunId: r.parentRunId, parentStatus });
    }
  }
}

type Refusal = Extract<RetryOutcome, { ok: false }>;

/**
 * The retry's rules that need no Redis (test/unit/retryPlan.test.ts): the status and
 * reason it may go on from, the extension it needs, and the limits it makes (within
 * the deployment's LIMIT_MAX_*). The budget room and waiting actions are checked
 * again by the script, atomically with the change.
 */
export function planRetry(
  run: { status: string; reason: string },
  old: RunLimits,
  ext: RetryExtension,
  now: number,
  ceilings: { LIMIT_MAX_STEPS: number; LIMIT_MAX_TOKENS: number; LIMIT_MAX_WALL_MS: number; LIMIT_MAX_COST: number },
): { ok: true; limits: RunLimits; extension: Required<RetryExtension> } | Refusal {
  const { status } = run;
  if (!(RETRYABLE_STATUSES as readonly string[]).includes(status)) return { ok: false, code: 'not_retryable', status };
  const why = reasonCode(run.reason);
  if (why === 'version_mismatch' || why === 'approval_expired') return { ok: false, code: why, status };
  const extension = { steps: ext.steps ?? 0, tokens: ext.tokens ?? 0, wallMs: ext.wallMs ?? 0, cost: ext.cost ?? 0 };
  const stoppedBy = why === 'cost' && !OWN_COST_STOP.test(run.reason) ? undefined : EXTENDABLE[why];
  if (status === 'budget_exceeded' && stoppedBy && extension[stoppedBy] === 0)
    return { ok: false, code: 'extension_required', budget: why };
  const oldCost = old.maxCost ?? 0;
  if (extension.cost > 0 && oldCost === 0) return { ok: false, code: 'no_money_budget' };
  const limits: RunLimits = {
    maxSteps: old.maxSteps + extension.steps,
    maxTokens: old.maxTokens + extension.tokens,
    // The wall clock granted in all (what LIMIT_MAX_WALL_MS bounds); the deadline is what the worker checks.
    maxWallMs: old.maxWallMs + extension.wallMs,
    deadlineAt: extension.wallMs > 0 ? Math.max(old.deadlineAt, now) + extension.wallMs : old.deadlineAt,
    ...(oldCost > 0 ? { maxCost: oldCost + extension.cost } : {}),
  };
  if (limits.maxSteps > ceilings.LIMIT_MAX_STEPS)
    return { ok: false, code: 'over_limit', field: 'steps', limit: ceilings.LIMIT_MAX_STEPS };
  if (limits.maxTokens > ceilings.LIMIT_MAX_TOKENS)
    return { ok: false, code: 'over_limit', field: 'tokens', limit: ceilings.LIMIT_MAX_TOKENS };
  if (limits.maxWallMs > ceilings.LIMIT_MAX_WALL_MS)
    return { ok: false, code: 'over_limit', field: 'wallMs', limit: ceilings.LIMIT_MAX_WALL_MS };
  if (ceilings.LIMIT_MAX_COST > 0 && (limits.maxCost ?? 0) > ceilings.LIMIT_MAX_COST)
    return { ok: false, code: 'over_limit', field: 'cost', limit: ceilings.LIMIT_MAX_COST };
  return { ok: true, limits, extension };
}

/** Tokens the tenant used today, when a daily budget is configured; undefined when none is. */
async function tenantDayUsed(ctx: EngineContext, tenant: string, now: number): Promise<number | undefined> {
  if (ctx.cfg.TENANT_DAILY_TOKENS <= 0) return undefined;
  const day = new Date(now).toISOString().slice(0, 10);
  return Number((await ctx.redis.get(ctx.keys.tenantTokens(tenant, day))) ?? 0);
}
