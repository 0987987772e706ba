/**
 * The ways a step leaves without a decision: handed back to a worker that serves
 * its version, delayed while a follow-up's previous run is at work, delayed while a
 * provider is out. Each either moves the job to BullMQ's delayed set and throws
 * DelayedError (no attempt is counted; no worker holds it meanwhile) or returns the
 * commit that stops the run with its status, reason and metric. If the process dies
 * before the move, the stall check redelivers the job and the verdict is made again.
 * Before any wait, the run's cancel is read again (beforeWait): a cancelled run ends now
 * instead of waiting and then calling the model (src/worker/step/cancel.ts).
 */

/** The commit that ends the run `cancelled` when its cancel is recorded, with what the attempts spent; else undefined. */
async function beforeWait(
  env: StepEnv,
  state: StepState,
  at: CancelPoint,
  charged = 0,
): Promise<CommitPlan | undefined> {
  return (await cancelRecorded(env, state, true)) ? cancelledPlan(env, state, at, charged) : undefined;
}
import { DelayedError } from 'bullmq';
import { wallClockStop } from '../../budget/tenantBudget.js';
import { waitForRate, type RateLimitWait } from '../../flow/rateWait.js';
import type { VersionVerdict } from '../versionGate.js';
import { cancelledPlan, cancelRecorded, type CancelPoint } from './cancel.js';
import type { StepEnv } from './env.js';
import { stopPlan, type CommitPlan, type StepState } from './state.js';

/**
 * A step this worker does not serve. Handed back while another live worker announces the
 * run's version; else the run parks needs_human with a reason of codes and versions only
 * (`version_mismatch: ...`, the version queue, or `unknown_agent: <name>`).
 */
export async function notServed(env: StepEnv, state: StepState): Promise<CommitPlan> {
  const { spec, log } = state;
  const verdict: VersionVerdict = await env.agents.verdict(spec);
  if (verdict.kind === 'hand_back') {
    const cancelled = await beforeWait(env, state, 'version_hand_back');
    if (cancelled) return cancelled;
    await state.job.delay(env.now() + verdict.delayMs);
    env.metrics.versionHandbacks.inc({ agent: spec.agent });
    log.info(
      { code: 'version_hand_back', agent: spec.agent, version: spec.agentVersion, delayMs: verdict.delayMs },
      'another worker serves this version: step handed back',
    );
    throw new DelayedError();
  }
  log.warn(
    { code: reasonCodeOf(verdict.reason), agent: spec.agent, version: spec.agentVersion, toolsHash: spec.toolsHash },
    "no live worker serves the run's version: parked for a person",
  );
  return stopPlan(state.step, { status: 'needs_human', reason: verdict.reason });
}

/**
 * A follow-up whose previous run is still queued or running waits FOLLOW_UP_WAIT_MS and asks
 * again. The wait is bounded by the follow-up's own deadline: one that would end at or past it
 * stops the run `budget_exceeded` (wall_clock). A cancel requested meanwhile ends it at once
 * (`cancelled`, beforeWait): a waiting follow-up commits now instead of after the previous run
 * and a model call. Nothing was sent to the model.
 */
export async function waitForPrevious(env: StepEnv, state: StepState, previousStatus: string): Promise<CommitPlan> {
  const { spec, log, step } = state;
  const now = env.now();
  const waitMs = env.cfg.FOLLOW_UP_WAIT_MS;
  const cancelled = await beforeWait(env, state, 'follow_up_wait');
  if (cancelled) return cancelled;
  if (now + waitMs >= spec.limits.deadlineAt) {
    const stop = wallClockStop(spec, now, true);
    env.metrics.budgetStops.inc({ kind: stop.kind });
    log.warn(
      { code: 'budget_exceeded', kind: stop.kind, previousRunId: spec.previousRunId, previousStatus },
      stop.reason,
    );
    const reason = `${stop.reason} waiting for the previous run ${spec.previousRunId}`;
    return stopPlan(step, { status: 'budget_exceeded', reason });
  }
  await state.job.delay(now + waitMs);
  env.metrics.followUpWaits.inc();
  log.info(
    { code: 'follow_up_wait', previousRunId: spec.previousRunId, previousStatus, waitMs },
    'previous run still at work: follow-up delayed',
  );
  throw new DelayedError();
}

export interface Outage {
  provider: string;
  /** What the provider asked (Retry-After), if it did. */
  retryAfterMs: number | undefined;
}

/**
 * A provider outage is a wait, not a failure: the job is delayed until the provider's
 * Retry-After (uncapped; else RETRY_MAX_MS) has passed. The first failure's time rides in
 * the job's data (`outageSince`). A wait that would end at or past the run's deadline stops
 * the run `budget_exceeded` (wall_clock); one that would end past MODEL_OUTAGE_MAX_MS from the
 * first failure parks it `needs_human` / `provider_unavailable`. What the failed attempts spent
 * (`charged`) is charged before the job moves, or by the commit that stops the run.
 */
export async function waitOutOutage(
  env: StepEnv,
  state: StepState,
  outage: Outage,
  charged: number,
  chargeAbandoned: (tokens: number) => Promise<void>,
): Promise<CommitPlan> {
  const { data, spec, log, step } = state;
  const cancelled = await beforeWait(env, state, 'outage_wait', charged);
  if (cancelled) return cancelled;
  const now = env.now();
  const waitMs = outage.retryAfterMs ?? env.cfg.RETRY_MAX_MS;
  const since = data.outageSince ?? now;
  if (now + waitMs >= spec.limits.deadlineAt) {
    const stop = wallClockStop(spec, now, true);
    env.metrics.budgetStops.inc({ kind: stop.kind });
    log.warn({ code: 'budget_exceeded', kind: stop.kind, waitMs }, stop.reason);
    return { ...stopPlan(step, { status: 'budget_exceeded', reason: stop.reason }), tokensDelta: charged };
  }
  const windowMs = env.cfg.MODEL_OUTAGE_MAX_MS;
  if (now + waitMs > since + windowMs) {
    const reason =
      `provider_unavailable: ${outage.provider} failing for ${now - since} ms, ` +
      `next try in ${waitMs} ms, window ${windowMs} ms`;
    log.warn(
      { code: 'provider_unavailable', provider: outage.provider, outageMs: now - since, waitMs },
      'provider outage past its window: the run goes to a person',
    );
    return { ...stopPlan(step, { status: 'needs_human', reason }), tokensDelta: charged };
  }
  if (charged > 0) await chargeAbandoned(charged);
  if (data.outageSince === undefined) await state.job.updateData({ ...data, outageSince: since });
  await state.job.delay(now + waitMs);
  env.metrics.modelWaits.inc({ provider: outage.provider });
  log.warn(
    { code: 'model_wait', provider: outage.provider, waitMs, outageMs: now - since },
    'provider unavailable: step delayed',
  );
  throw new DelayedError();
}

/**
 * The model's rate limit is spent: the job waits for the bucket (src/flow/rateWait.ts), or, when that
 * is past the run's deadline, the run stops `budget_exceeded` with what the failed attempts spent.
 */
export async function waitForRateLimit(
  env: StepEnv,
  state: StepState,
  wait: RateLimitWait,
  charged: number,
  chargeAbandoned: (tokens: number) => Promise<void>,
): Promise<CommitPlan> {
  const cancelled = await beforeWait(env, state, 'rate_limit_wait', charged);
  if (cancelled) return cancelled;
  const step = {
    delay: (untilMs: number) => state.job.delay(untilMs),
    spec: state.spec,
    wait,
    charged,
    now: env.now(),
  };
  const reason = await waitForRate(env, step, { chargeAbandoned, log: state.log });
  return { ...stopPlan(state.step, { status: 'budget_exceeded', reason }), tokensDelta: charged };
}

/** The code of a reason (`version_mismatch: ...` -> `version_mismatch`). */
function reasonCodeOf(reason: string): string {
  return reason.split(':', 1)[0]!;
}
