/**
 * Stage 4, commit: the plan written in one fenced, atomic request (commitStep-23.lua
 * through the store): the journal entries, the budget, the cursor and status, the next
 * step's job, and the completion of this job. Crash points `before_commit` and
 * `after_commit` bracket it: a death before leaves the run wholly before the commit
 * (the job is redelivered), a death after leaves it wholly after (the redelivered job
 * is stale and refused by the fence).
 * Decision record 0003: docs/decisions/0003-the-journal-rides-in-the-round-trips-bullmq-alread.md.
 */
import { FenceError } from '../../core/errors.js';
import { encodeEntry, packEntry, type StoredEntry } from '../../core/journal.js';
import { isContext, type RunUsage } from '../../budget/tenantBudget.js';
import { countRunFinished } from '../../metrics/metrics.js';
import type { StepJobData } from '../../runs/spec.js';
import { endsRun } from '../../core/status.js';
import { waitIdOf } from '../../runs/waits.js';
import type { StepEnv } from './env.js';
import { grown, type CommitPlan, type StepState } from './state.js';
import type { StepCommit } from './store.js';

/**
 * @param fetchNext the commit also fetches the worker's next job (BullMQ's worker then takes it from the completion).
 */
export async function commit(env: StepEnv, state: StepState, plan: CommitPlan, fetchNext: boolean): Promise<void> {
  env.crash.hit('before_commit', state.step);
  const record = commitRecord(env, state, plan, fetchNext);
  const nextUsed = usedAfter(state.used, plan, record.contextBytesDelta ?? 0, record.costDelta);
  const reply = await env.store.commit(state.job, record).catch((err: unknown) => {
    if (err instanceof FenceError && err.code === 'decision_exists')
      state.log.warn({ code: 'decision_exists' }, 'a decision was journalled concurrently');
    throw err;
  });
  if (reply.completionRefused !== undefined) {
    // Committed, but BullMQ refused the completion: its worker completes the job as usual.
    state.log.warn(
      { code: 'complete_in_commit_refused', bullmqCode: reply.completionRefused },
      'job not completed by the commit',
    );
  }
  env.metrics.stepsCommitted.inc();
  env.crash.hit('after_commit', state.step);
  state.costUncharged = 0;
  const { committed } = reply;
  if (plan.wait && committed === plan.status) await addWakeJob(env, state, plan, nextUsed);
  await childBookkeeping(env, state, plan, committed);
  // A recorded cancel or an expired approval may have changed the status the plan asked for.
  const reason =
    committed === plan.status ? plan.reason : committed === 'cancelled' ? 'cancelled_by_operator' : 'approval_expired';
  countRunFinished(env.metrics, committed, reason);
  if (committed !== 'running') {
    // Nothing of a run that stopped or parked stays cached here (its input is customer text); a parked run's next
    // step reads its spec again.
    env.store.forgetTranscript(state.runId);
    env.store.forgetSpec(state.runId);
    // The run stopped or parked: its slot goes to the next run in line. If this fails or the process dies here,
    // the bookkeeping sweep releases it.
    await env.admission
      ?.release(state.runId, state.job.id)
      .catch((err: unknown) =>
        state.log.warn({ code: 'flow_release_failed', err }, 'slot not released (the sweep will)'),
      );
    const logged = committed === plan.status ? plan.reason : undefined;
    state.log.info(
      { code: 'run_' + committed, reason: logged, steps: nextUsed.steps, tokens: nextUsed.tokens },
      'run stopped',
    );
  }
}

/**
 * A parent parked on a child that already ended resumes now; a child that ended wakes its parent now. Either is
 * only sooner: if it fails or the process dies here, the parent's wake job fires at its deadline, or the stuck-run
 * sweep promotes it (src/runs/stuckRuns.ts).
 */
async function childBookkeeping(env: StepEnv, state: StepState, plan: CommitPlan, committed: string): Promise<void> {
  const { children } = env;
  const parent = state.spec.parent;
  let woken: Promise<boolean> | undefined;
  if (plan.wait?.kind === 'child' && committed === plan.status) woken = children?.wakeIfChildEnded(state.runId);
  else if (parent && endsRun(committed)) woken = children?.wakeParent(parent.runId, state.runId);
  await woken?.catch((err: unknown) =>
    state.log.warn({ code: 'child_wake_failed', err }, "parent's wake job not promoted (the sweep will)"),
  );
}

/**
 * The parked wait's wake job, delayed until the wait's time (promoted at once when an event was delivered before
 * the job existed). If this fails or the process dies before it, the run is parked with no job: the stuck-run
 * sweep adds it (RunStore.ensureCurrentStepJob), and it finds a delivery when it fires.
 */
async function addWakeJob(env: StepEnv, state: StepState, plan: CommitPlan, used: RunUsage): Promise<void> {
  const { runId, step, data } = state;
  const wake: StepJobData = {
    v: 1,
    runId,
    step: step + 1,
    used,
    wake: true,
    ...(data.limits ? { limits: data.limits } : {}),
  };
  const wait = plan.wait!;
  const event =
    wait.kind === 'event'
      ? { tenant: state.spec.tenant, agent: state.spec.agent, key: wait.key, waitId: waitIdOf(runId, wait) }
      : undefined;
  await env.store.addWakeJob(wake, wait.at, event).catch((err: unknown) => {
    state.log.warn({ code: 'wake_job_not_added', err }, 'wake job not added (the sweep will)');
  });
}

/** The plan as the store's commit record: entries encoded, the transcript's growth, the next step's job. */
export function commitRecord(env: StepEnv, state: StepState, plan: CommitPlan, fetchNext: boolean): StepCommit {
  const { runId, step, data, used } = state;
  const encoded: StoredEntry[] = [];
  let bytes = 0;
  for (const entry of plan.entries) {
    const json = encodeEntry(entry);
    // The budget counts the transcript's JSON (what a prompt carries), not its stored form.
    if (isContext(entry.kind)) bytes += Buffer.byteLength(json);
    encoded.push(packEntry(json));
  }
  const next: StepJobData | undefined =
    plan.status === 'running'
      ? {
          v: 1,
          runId,
          step: step + 1,
          used: usedAfter(used, plan, bytes, state.costUncharged),
          ...(data.limits ? { limits: data.limits } : {}),
        }
      : undefined;
  return {
    runId,
    step,
    plan,
    encoded,
    contextBytesDelta: used.contextBytes === undefined ? undefined : bytes,
    next,
    nextPriority: next ? (env.admission?.stepPriority?.(state.spec.tenant) ?? 0) : 0,
    fetchNext,
    startedEvent: state.startedEmitted ? '' : state.startedEvent,
    now: env.now(),
    decision: plan.carriesDecision ? undefined : state.decisionDigest,
    costDelta: state.costUncharged,
  };
}

function usedAfter(used: RunUsage, plan: CommitPlan, bytes: number, costDelta: number): RunUsage {
  const cost = (used.cost ?? 0) + costDelta;
  return grown(
    {
      steps: used.steps + plan.stepsDelta,
      tokens: used.tokens + plan.tokensDelta,
      contextBytes: used.contextBytes,
      ...(cost > 0 ? { cost } : {}),
    },
    bytes,
  );
}
