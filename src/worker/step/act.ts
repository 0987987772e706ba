/**
 * Stage 3, act: the decision's tool calls, run concurrently. Reads are retried in
 * code; writes go through the effect ledger (src/ledger), each its own action with
 * its own key, which answers a confirmed effect from its record and reconciles one
 * that may have left the process. A write declared `runsAlone` runs by itself: the
 * calls before it finish first, the calls after it start after it. The run's deadline
 * bounds the tools too: none starts past it, none waits past it (the calls not run
 * are dropped). Observations go to the commit in the order the model asked.
 *
 * In a step of several calls whose decision is journalled, each call's observation is
 * journalled as soon as it finishes: if the process dies, the next delivery runs only
 * the calls not journalled (a write in flight is settled by the ledger on its own).
 * Returns the step's commit: the observations and the run's next status, or the park a
 * write asked for.
 */
import type { Agent } from '../../core/agent.js';
import { ShutdownError } from '../../core/errors.js';
import { DeadlineError } from '../../core/timeout.js';
import {
  encodeEntry,
  packEntry,
  type DecisionEntry,
  type JournalEntry,
  type ObservationEntry,
} from '../../core/journal.js';
import type { ToolContext } from '../../core/tool.js';
import { wallClockStop, type BudgetStop } from '../../budget/tenantBudget.js';
import { nextStatus } from '../../budget/policy.js';
import type { StepEnv } from './env.js';
import { batchesOf, runTool, type ToolCall, type ToolResult } from './tools.js';
import { isWaitCall, startWaits } from './waitCalls.js';
import { statusOfWait, type WaitRecord } from '../../runs/waits.js';
import { grown, stopPlan, total, type CommitPlan, type StepState } from './state.js';
import type { RunStatus } from '../../core/status.js';

/** A call's result as act keeps it: journalled already (by this delivery or an earlier one), or to be committed. */
type Done = ToolResult & { journalled?: boolean };

export async function act(env: StepEnv, state: StepState, agent: Agent, decision: DecisionEntry): Promise<CommitPlan> {
  const { runId, step, spec, signal } = state;
  const ctx: ToolContext = { runId, step, signal, trace: state.trace, input: spec.input };
  const calls = decision.toolCalls;
  const results = calls.map((c) => earlier(state, c));
  const journalEach = !state.carriesDecision && calls.length > 1;
  let wallStop: BudgetStop | undefined;
  for (const batch of batchesOf(agent, calls)) {
    const todo = batch.filter((i) => !results[i]);
    if (todo.length === 0) continue;
    if (signal.aborted) throw new ShutdownError();
    if (env.now() >= spec.limits.deadlineAt) {
      wallStop = wallClockStop(spec, env.now());
      break;
    }
    if (todo.length > 1) env.metrics.parallelToolCalls.observe(todo.length);
    const run = (i: number) => runAndJournal(env, state, agent, calls[i]!, ctx, journalEach);
    wallStop = settle(env, state, todo, await Promise.allSettled(todo.map(run)), results);
    if (wallStop || results.some((r) => r && 'park' in r)) break;
  }
  const waits = calls.flatMap((c, i) => (isWaitCall(agent, c) && !results[i] ? [i] : []));
  let waitPark: WaitRecord | undefined;
  if (waits.length > 0 && !wallStop && !results.some((r) => r && 'park' in r)) {
    const started = await startWaits(env, state, agent, calls, waits, ctx);
    for (const [i, obs] of started.observed) results[i] = { obs };
    wallStop = started.stop;
    waitPark = started.park;
  }
  // A write was requested, so the decision is already journalled: park at this step
  // (a park into waiting_approval records the approval request in the same commit).
  const park = results.find((r) => r && 'park' in r);
  const observations = unjournalled(results);
  if (park && 'park' in park)
    return {
      ...stopPlan(step, park.park, observations),
      ...(park.approvalFor ? { approvalFor: park.approvalFor } : {}),
    };
  return advancePlan(env, state, decision, observations, wallStop, waitPark);
}

/** A call an earlier delivery of this step finished and journalled: its observation, not run again. */
function earlier(state: StepState, call: ToolCall): Done | undefined {
  const obs = state.observed?.find((o) => o.callId === call.id);
  return obs ? { obs, journalled: true } : undefined;
}

/**
 * The batch's outcomes into `results` (by the calls' indexes). A call that ran into the deadline
 * stops the step on the wall clock; any other error is thrown once every call of the batch has settled.
 */
function settle(
  env: StepEnv,
  state: StepState,
  todo: number[],
  settled: PromiseSettledResult<Done>[],
  results: (Done | undefined)[],
): BudgetStop | undefined {
  let stop: BudgetStop | undefined;
  let failure: { err: unknown } | undefined;
  settled.forEach((s, j) => {
    if (s.status === 'fulfilled') results[todo[j]!] = s.value;
    else if (s.reason instanceof DeadlineError && !state.signal.aborted)
      stop ??= wallClockStop(state.spec, env.now(), s.reason.cause !== undefined);
    else failure ??= { err: s.reason };
  });
  if (failure) throw failure.err;
  return stop;
}

/** One call, and its observation journalled at once when the step journals each call. */
async function runAndJournal(
  env: StepEnv,
  state: StepState,
  agent: Agent,
  call: ToolCall,
  ctx: ToolContext,
  journalEach: boolean,
): Promise<Done> {
  const result = await runTool(env, state, agent, call, ctx);
  if (!journalEach || !('obs' in result)) return result;
  const json = encodeEntry(result.obs);
  const bytes = Buffer.byteLength(json);
  const encoded = packEntry(json);
  await env.store.journalObservation(state.job, {
    runId: state.runId,
    observation: result.obs,
    encoded,
    contextBytesDelta: state.used.contextBytes === undefined ? undefined : bytes,
  });
  // The script grew the run's byte count: the next step's job carries it.
  state.used = grown(state.used, bytes);
  env.crash.hit('after_observation', state.step);
  return { ...result, journalled: true };
}

/** The observations still to be committed, in the order the model asked. */
function unjournalled(results: (Done | undefined)[]): ObservationEntry[] {
  const out: ObservationEntry[] = [];
  for (const r of results) if (r && 'obs' in r && !r.journalled) out.push(r.obs);
  return out;
}

/**
 * The commit of a step whose tools all ran (or stopped at the deadline): the run's next status by the budget policy.
 */
function advancePlan(
  env: StepEnv,
  state: StepState,
  decision: DecisionEntry,
  observations: ObservationEntry[],
  wallStop: BudgetStop | undefined,
  waitPark: WaitRecord | undefined,
): CommitPlan {
  const { step, spec, carriesDecision } = state;
  const entries: JournalEntry[] = carriesDecision ? [decision, ...observations] : [...observations];
  const next = nextStatus(spec, state.used, decision, wallStop);
  // A wait parks the run, unless a budget ends it first.
  const { status, reason, budget } = next.status === 'running' && waitPark ? parkOn(env, waitPark) : next;
  if (budget) env.metrics.budgetStops.inc({ kind: budget });
  if (budget === 'wall_clock') state.log.warn({ code: 'budget_exceeded', kind: budget }, reason);
  if (status !== 'running') entries.push({ v: 1, kind: 'status', step, status, reason });
  return {
    entries,
    carriesDecision,
    status,
    reason,
    stepsDelta: 1,
    tokensDelta: carriesDecision ? total(decision.usage) : 0,
    advance: true,
    ...(waitPark && status === statusOfWait(waitPark) ? { wait: waitPark } : {}),
  };
}

/** The status and reason of a park on a wait (the reason names its due time and child, never the event key). */
function parkOn(env: StepEnv, wait: WaitRecord): { status: RunStatus; reason: string; budget?: undefined } {
  env.metrics.waits.inc({ kind: wait.kind, outcome: 'parked' });
  const at = new Date(wait.at).toISOString();
  const reason =
    wait.kind === 'sleep'
      ? `sleep until ${at}`
      : wait.kind === 'event'
        ? `event wait until ${at}`
        : `${wait.children.length > 1 ? 'child runs' : 'child run'} ${wait.children.map((c) => c.runId).join(', ')} until ${at}`;
  return { status: statusOfWait(wait), reason };
}
