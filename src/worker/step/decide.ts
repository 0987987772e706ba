/**
 * Stage 2, decide: the step's decision. A decision an earlier delivery journalled is
 * reused (the model is not asked again). Otherwise: a follow-up waits for its previous
 * run, the budget pre-flight checks what the call may spend, and the model is called
 * (src/worker/step/model.ts), unless the run's cancel is recorded (checked before each
 * attempt and each wait, src/worker/step/cancel.ts). A decision followed by a write or a
 * child run, or made on a redelivery, is journalled at once (fenced, crash point
 * `after_decision`); any other rides in the commit. Returns the commit that stops the run, or undefined with `state.decision` set.
 */
import type { Agent } from '../../core/agent.js';
import { encodeEntry, entryDigest, packEntry, type DecisionEntry } from '../../core/journal.js';
import { preflight, type BudgetKind } from '../../budget/tenantBudget.js';
import { cancelledPlan } from './cancel.js';
import type { StepEnv } from './env.js';
import { callModel, type Called } from './model.js';
import { exactIfRefused, type Prompts } from './prompt.js';
import { grown, stopPlan, total, type CommitPlan, type StepState } from './state.js';
import { waitForPrevious, waitForRateLimit, waitOutOutage } from './waits.js';

export async function decide(
  env: StepEnv,
  prompts: Prompts,
  state: StepState,
  agent: Agent,
): Promise<CommitPlan | undefined> {
  if (state.decision) {
    state.log.info({ code: 'decision_replayed' }, 'reusing the journalled decision');
    return undefined;
  }
  // A follow-up's model sees the previous conversation, read once the previous run is no longer at work.
  const followUp = await env.followUps.context(agent, state.spec);
  if ('waitingFor' in followUp) return waitForPrevious(env, state, followUp.waitingFor);
  // What one attempt may spend: the same for every attempt of this call (the transcript does not change between them).
  const estimate = await prompts.estimateOf(agent, state.spec, state.used);
  const stop = await exactIfRefused(estimate, (tokens) => preflight(state.spec, state.used, tokens, env.now()));
  if (stop) return budgetStopped(env, state, stop.kind, stop.reason, 0);
  const chargeAbandoned = (tokens: number) => chargeAbandonedTokens(env, state, tokens);
  // The stream's target is built only when answers are streamed (MODEL_STREAMING).
  const stream = env.cfg.MODEL_STREAMING
    ? env.store.textStream(state.job, {
        runId: state.runId,
        step: state.step,
        startedEvent: state.startedEvent,
        redelivered: state.redelivered,
        log: state.log,
      })
    : undefined;
  let called: Called;
  try {
    called = await callModel(env, state, {
      agent,
      prompt: prompts.promptOf(agent, state.spec),
      estimate,
      stream,
      chargeAbandoned,
    });
  } finally {
    state.startedEmitted ||= stream?.startedEmitted === true;
  }
  if ('cancelled' in called) return cancelledPlan(env, state, 'model_attempt', called.charged);
  if ('throttled' in called) return waitForRateLimit(env, state, called.throttled, called.charged, chargeAbandoned);
  if ('unavailable' in called) return waitOutOutage(env, state, called.unavailable, called.charged, chargeAbandoned);
  if ('failed' in called) {
    if (called.budget) return budgetStopped(env, state, called.budget, called.failed.reason, called.charged);
    return { ...stopPlan(state.step, called.failed), tokensDelta: called.charged };
  }
  await keep(env, state, agent, called.decision);
  return undefined;
}

/** A budget stop before or during the call: counted, logged, and committed with what the attempts spent. */
function budgetStopped(env: StepEnv, state: StepState, kind: BudgetKind, reason: string, charged: number): CommitPlan {
  env.metrics.budgetStops.inc({ kind });
  state.log.warn({ code: 'budget_exceeded', kind }, reason);
  return { ...stopPlan(state.step, { status: 'budget_exceeded', reason }), tokensDelta: charged };
}

/**
 * Keeps the decision: journalled now when a write or a child run follows (its effects, or the child started
 * under this call's id, must find it after a crash) or on a redelivery (a concurrent delivery must not decide
 * again); else it rides in the commit.
 */
async function keep(env: StepEnv, state: StepState, agent: Agent, decision: DecisionEntry): Promise<void> {
  state.decision = decision;
  const mustJournal = decision.toolCalls.some((c) => startsEffect(agent, c.name));
  if (!mustJournal && !state.redelivered) {
    state.carriesDecision = true;
    return;
  }
  const json = encodeEntry(decision);
  const bytes = Buffer.byteLength(json);
  const encoded = packEntry(json);
  await env.store.journalDecision(state.job, {
    runId: state.runId,
    decision,
    encoded,
    contextBytesDelta: state.used.contextBytes === undefined ? undefined : bytes,
    startedEvent: state.startedEmitted ? '' : state.startedEvent,
    now: env.now(),
    costDelta: state.costUncharged,
  });
  const cost = (state.used.cost ?? 0) + state.costUncharged;
  state.costUncharged = 0;
  state.decisionDigest = entryDigest(encoded);
  state.log.debug({ code: 'decision_journalled' }, 'decision journalled');
  state.startedEmitted = true;
  state.used = grown({ ...state.used, tokens: state.used.tokens + total(decision.usage), cost }, bytes);
  env.crash.hit('after_decision', state.step);
}

/** A write, or an agent tool (a wait tool whose call starts a child run: its child is named after the call). */
function startsEffect(agent: Agent, name: string): boolean {
  const tool = agent.tools.get(name);
  return tool?.effect === 'write' || (tool?.effect === 'wait' && tool.startsChild === true);
}

/**
 * Charges tokens spent by a step handed back before its decision (failed attempts at SIGTERM,
 * or before an outage's wait). Fenced: if another owner has the step, nothing is charged (they
 * are lost, logged).
 */
async function chargeAbandonedTokens(env: StepEnv, state: StepState, tokens: number): Promise<void> {
  const cost = state.costUncharged;
  await env.store.chargeTokens(state.job, state.runId, state.step, tokens, cost).then(
    () => {
      state.costUncharged -= cost;
    },
    (err: unknown) => {
      state.log.warn({ code: 'abandoned_tokens_not_charged', tokens, err }, 'tokens of abandoned attempts not charged');
    },
  );
}
