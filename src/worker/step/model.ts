/**
 * The step's model call, retried in code. Before each attempt: the deadline and
 * what it may spend (run and tenant day); after it: what it did spend, failed
 * attempts included (their billed usage, or without one the bound of what the
 * provider may bill: attemptCharge, src/budget/policy.ts). Each attempt waits at most until the
 * run's deadline, and no backoff is slept past it. Handed back at SIGTERM, the
 * step charges what its failed attempts spent (chargeAbandoned).
 */
import {
  AgentError,
  CancelledError,
  hasErrorCode,
  isAgentError,
  isRetryable,
  TerminalError,
  type RetryableError,
} from '../../core/errors.js';
import { DeadlineError, withDeadlineScope, withScopeSignal } from '../../core/timeout.js';
import {
  tokenUsageSchema,
  type DecisionEntry,
  type JournalEntry,
  type TokenUsage,
  type ToolCall,
} from '../../core/journal.js';
import { reachOf, type AttemptReach, type ModelProvider, type ModelTurn } from '../../core/model.js';
import { withRetry } from '../../core/withRetry.js';
import { distinctCallIds } from '../../core/callIds.js';
import type { Agent } from '../../core/agent.js';
import { traced } from '../../metrics/tracing.js';
import { costOf, estimateCost, type Price } from '../../core/prices.js';
import type { SpendHold } from '../../budget/spend.js';
import {
  attemptCharge,
  attemptCheck,
  BudgetStopError,
  costCheck,
  spentCheck,
  wallClockStop,
  type BudgetKind,
} from '../../budget/tenantBudget.js';
import { RateLimitWait, ratedAttempt, type RatedAttempt } from '../../flow/rateWait.js';
import type { TextStream } from '../textStream.js';
import { cancelRecorded } from './cancel.js';
import type { StepEnv } from './env.js';
import { exactIfRefused, type Estimate, type Prompt } from './prompt.js';
import { total, type StepState, type Terminal } from './state.js';

/**
 * A model call's result: a decision, the stop it ends in, or a provider outage to wait out
 * (`retryAfterMs`: what the provider asked, if it did), with the tokens its attempts spent.
 */
export type Called =
  | { decision: DecisionEntry }
  | { failed: Terminal; charged: number; budget?: BudgetKind }
  | { unavailable: { provider: string; retryAfterMs: number | undefined }; charged: number }
  | { throttled: RateLimitWait; charged: number }
  | { cancelled: true; charged: number };

/**
 * What one call needs besides the state: the agent, its prompt, the estimate, and the step's charge of abandoned
 * tokens.
 */
export interface CallInput {
  agent: Agent;
  prompt: Prompt;
  estimate: Estimate;
  stream: TextStream | undefined;
  chargeAbandoned: (tokens: number) => Promise<void>;
}

/**
 * A provider named its wait (Retry-After): not retried in this delivery (withRetry passes it through), the job is
 * delayed.
 */
class NamedWait extends AgentError {
  constructor(readonly retryable: RetryableError) {
    super('transient', retryable.message, retryable.details);
  }
}

export function callModel(env: StepEnv, state: StepState, input: CallInput): Promise<Called> {
  const { spec, step } = state;
  return traced(
    env.tracer,
    {
      name: 'agent.model',
      parent: state.trace,
      attributes: () => ({
        'agent.run_id': spec.runId,
        'agent.step': step,
        'agent.model': spec.model,
        'agent.model_id': spec.modelId ?? '',
      }),
      outcome: spanOutcome,
    },
    async () => {
      const provider = env.providers.get(spec.model);
      if (!provider) return { failed: { status: 'failed', reason: `model_unavailable: ${spec.model}` }, charged: 0 };
      return new ModelCall(env, state, input, provider).run();
    },
  );
}

function spanOutcome(r: Called): Record<string, string | number | string[]> {
  if ('failed' in r) return { 'agent.outcome': r.failed.status, 'agent.tokens': r.charged };
  if ('unavailable' in r) return { 'agent.outcome': 'provider_unavailable', 'agent.tokens': r.charged };
  if ('throttled' in r) return { 'agent.outcome': 'rate_limited', 'agent.tokens': r.charged };
  if ('cancelled' in r) return { 'agent.outcome': 'cancelled', 'agent.tokens': r.charged };
  return {
    'agent.outcome': 'decided',
    'agent.tokens': total(r.decision.usage),
    'agent.tools': r.decision.toolCalls.map((c) => c.name),
  };
}

/** One model call of one step: its attempts, and what they spent (`usage`, failed attempts included). */
class ModelCall {
  private readonly usage: TokenUsage = { promptTokens: 0, completionTokens: 0 };
  /** µ$ the attempts cost, and the price versions they were charged at. */
  private cost = 0;
  private readonly priceVersions = new Set<string>();
  private attempts = 0;
  /**
   * When the attempt's tenant tokens were reserved: its settlement goes to that day's counter, so an attempt in flight
   * at midnight neither leaves its estimate on the old day nor starts the new one below zero.
   */
  private tenantReservedAt = 0;
  private readonly labels: { tenant: string; provider: string };
  private transcript: JournalEntry[] | undefined;
  /** For the scripted provider, its turns (the run's own script first). */
  private readonly script: unknown;

  constructor(
    private readonly env: StepEnv,
    private readonly state: StepState,
    private readonly input: CallInput,
    private readonly provider: ModelProvider,
  ) {
    this.labels = { tenant: state.spec.tenant, provider: provider.name };
    this.script = state.spec.script ?? input.agent.demoScript?.(state.spec.input);
  }

  async run(): Promise<Called> {
    const { env, state } = this;
    env.metrics.modelCalls.inc(this.labels);
    const needsTranscript =
      this.provider.needsTranscript || this.provider.needsTranscriptFor?.({ script: this.script, step: state.step });
    if (needsTranscript) this.transcript = await env.store.transcript(state.runId);
    let turn: ModelTurn;
    try {
      turn = await withRetry(
        { maxAttempts: env.cfg.MODEL_MAX_ATTEMPTS, baseMs: env.cfg.RETRY_BASE_MS, maxMs: env.cfg.RETRY_MAX_MS },
        (attempt) => this.attempt(attempt),
        {
          signal: state.signal,
          deadlineAt: state.spec.limits.deadlineAt,
          now: env.now,
          onRetry: (attempt, err, delayMs) =>
            state.log.warn({ code: 'model_retry', attempt, delayMs, err }, 'model call retried'),
        },
      );
    } catch (err) {
      return this.failed(err);
    }
    return this.decided(turn);
  }

  /**
   * What one attempt may spend, checked and reserved: the run's budget, the model's rate limit (one
   * request and the estimate, or a RateLimitWait with nothing reserved), the tenant's day.
   */
  private async reserve(): Promise<RatedAttempt | undefined> {
    const { env, state } = this;
    const { spec } = state;
    const { estimate } = this.input;
    const usedTokens = state.used.tokens + total(this.usage);
    const stop = await exactIfRefused(estimate, (tokens) => attemptCheck(spec, usedTokens, tokens, env.now()));
    if (stop) throw new BudgetStopError(stop);
    const costStop = costCheck(spec, (state.used.cost ?? 0) + this.cost, this.costEstimate(env.now()));
    if (costStop) throw new BudgetStopError(costStop);
    const rated = await ratedAttempt(env.rates, spec, this.provider.name, estimate.tokens, env.now());
    this.tenantReservedAt = env.now();
    const tenantStop = await exactIfRefused(estimate, (tokens) =>
      env.tenant.reserve(spec.tenant, tokens, this.tenantReservedAt),
    );
    if (tenantStop) {
      await rated?.settle(0);
      throw new BudgetStopError(tenantStop);
    }
    return rated;
  }

  /**
   * One attempt: checked before (the run's cancel, run budget, rate limit, tenant day), charged after (what it did
   * spend, failed or not: charge(), the one rule for every ceiling the attempt reserved against).
   */
  private async attempt(attempt: number): Promise<ModelTurn> {
    const { env, state } = this;
    const { spec } = state;
    const { estimate } = this.input;
    this.attempts = attempt;
    await this.beforeAttempt(attempt);
    const rated = await this.reserve();
    // The attempt's price: the version in effect now, recorded with its charge (a later change never reprices it).
    const price = this.priceNow();
    const hold = await this.reserveSpend(rated, price);
    let spent = 0;
    let cost = 0;
    try {
      const t = await this.complete(attempt);
      // An answer without usage is charged its bound (and fails the run missing_usage, decided()).
      [spent, cost] = this.charge(t.usage, 'answer', price);
      env.metrics.modelAttempts.inc({ ...this.labels, outcome: 'ok' });
      return t;
    } catch (err) {
      env.metrics.modelAttempts.inc({ ...this.labels, outcome: isRetryable(err) ? 'retryable' : 'error' });
      const details = (err as AgentError).details as Record<string, unknown> | undefined;
      // Cut by this process's own shutdown (a SIGTERM's hand-over): charged as a killed worker's call is, nothing to
      // the run (docs/budgets.md); the next owner asks again and is charged. A provider's own reach still counts.
      const reach = reachOf(details) ?? (state.signal.aborted ? 'none' : undefined);
      [spent, cost] = this.charge(details?.usage, reach, price);
      await rated?.failed(err, env.metrics);
      const named = isRetryable(err) && err.retryAfterMs !== undefined && !state.signal.aborted;
      if (named) throw new NamedWait(err);
      throw err;
    } finally {
      await rated?.settle(spent);
      await env.tenant.settle(spec.tenant, spent - estimate.tokens, this.tenantReservedAt);
      env.spend?.settle(this.scope(), cost, hold, env.now());
    }
  }

  /**
   * An attempt's charge (attemptCharge): the usage it reported (validated), else the bound of how far it got, the
   * estimate's prompt tokens and, when the model may have generated, the request's completion cap. Returns its
   * tokens and cost (µ$), both 0 when nothing reached the model.
   */
  private charge(reported: unknown, reach: AttemptReach | undefined, price: Price | undefined): [number, number] {
    const cap = this.env.cfg.COMPLETION_TOKEN_CAP;
    const bound = {
      promptTokens: Math.max(0, this.input.estimate.tokens - cap),
      completionTokens: this.completionCap(),
    };
    const usage = attemptCharge(reported === undefined ? undefined : validUsage(reported), reach, bound);
    return usage ? this.add(usage, price) : [0, 0];
  }

  /** The request's completion cap: the run's maxOutputTokens may only lower the deployment's (the pre-flight counts it). */
  private completionCap(): number {
    return Math.min(this.env.cfg.COMPLETION_TOKEN_CAP, this.state.spec.modelOptions?.maxOutputTokens ?? Infinity);
  }

  private scope() {
    const { spec } = this.state;
    return {
      tenant: spec.tenant,
      agent: spec.agent,
      provider: this.provider.name,
      model: spec.modelId ?? this.provider.defaultModel ?? '*',
    };
  }

  private priceNow(): Price | undefined {
    return this.env.spend?.priceAt(
      this.provider.name,
      this.state.spec.modelId ?? this.provider.defaultModel,
      this.env.now(),
    );
  }

  /**
   * The most one attempt may cost (µ$): the estimate's input at the dearest input price and the completion cap at the
   * output price; 0 for a model without a price.
   */
  private costEstimate(nowMs: number): number {
    return attemptCostEstimate(this.env, this.provider, this.state.spec.modelId, this.input.estimate.tokens, nowMs);
  }

  /**
   * The tenant's, agent's and fleet's money: the attempt's cost estimate reserved on the counters with a limit (a
   * stop names the cost); a model without a price is refused while a money limit is in force (its spend could not be
   * bounded), never charged zero. Without a tenant, agent or fleet limit nothing is reserved: the attempt's
   * settlement alone records its spend.
   */
  private async reserveSpend(
    rated: RatedAttempt | undefined,
    price: Price | undefined,
  ): Promise<SpendHold | undefined> {
    const { env, state } = this;
    const spend = env.spend;
    if (!spend) return undefined;
    const limited = spend.limited || (state.spec.limits.maxCost ?? 0) > 0;
    let stop;
    if (!price) {
      if (!limited) return undefined;
      stop = { kind: 'cost' as const, reason: `cost: no price for ${this.provider.name}/${this.scope().model}` };
    } else {
      if (!spend.limited) return undefined;
      const reserved = await spend.reserve(this.scope(), this.costEstimate(env.now()), env.now());
      if ('hold' in reserved) return reserved.hold;
      stop = reserved.stop;
    }
    await rated?.settle(0);
    await env.tenant.settle(state.spec.tenant, -this.input.estimate.tokens, this.tenantReservedAt);
    throw new BudgetStopError(stop);
  }

  /**
   * A recorded cancel stops the call before the attempt (src/worker/step/cancel.ts): the first attempt uses the flag
   * the load stage read, a retry reads it again. Not retried (withRetry passes a CancelledError through).
   */
  private async beforeAttempt(attempt: number): Promise<void> {
    if (await cancelRecorded(this.env, this.state, attempt > 1))
      throw new CancelledError("the run's cancel is recorded: no model attempt", { attempt });
  }

  /** The provider's answer to one attempt; its streamed text is all written before the decision can be (end(true)). */
  private async complete(attempt: number): Promise<ModelTurn> {
    const { env, state, input } = this;
    const { spec } = state;
    const streamed = input.stream?.attempt(attempt);
    let answer: ModelTurn;
    try {
      answer = await withDeadlineScope(
        spec.limits.deadlineAt,
        state.signal,
        (scope) =>
          this.provider.complete(
            withScopeSignal(
              {
                runId: spec.runId,
                step: state.step,
                attempt,
                instructions: input.prompt.instructions,
                prompt: input.prompt.prompt,
                tools: input.agent.tools.specs,
                // The run's pinned model; its maxOutputTokens may only lower the deployment's cap.
                model: spec.modelId,
                options: spec.modelOptions,
                maxCompletionTokens: this.completionCap(),
                script: this.script,
                ...(this.transcript ? { transcript: this.transcript } : {}),
                ...(streamed ? { onTextDelta: streamed.push } : {}),
              },
              scope,
            ),
          ),
        env.now,
      );
    } catch (err) {
      await streamed?.end(false);
      throw err;
    }
    await streamed?.end(true);
    return answer;
  }

  /** Adds an attempt's charged usage and its cost at `price`; returns its tokens and its cost (µ$). */
  private add(u: TokenUsage, price: Price | undefined): [number, number] {
    this.usage.promptTokens += u.promptTokens;
    this.usage.completionTokens += u.completionTokens;
    if (u.cachedInputTokens) this.usage.cachedInputTokens = (this.usage.cachedInputTokens ?? 0) + u.cachedInputTokens;
    if (u.cacheWriteTokens) this.usage.cacheWriteTokens = (this.usage.cacheWriteTokens ?? 0) + u.cacheWriteTokens;
    const cost = price ? costOf(u, price) : 0;
    if (price) {
      this.cost += cost;
      this.priceVersions.add(price.version);
      this.state.costUncharged += cost;
      const { tenant, agent, provider, model } = this.scope();
      this.env.metrics.spend.inc({ tenant, agent, provider, model }, cost);
    }
    return [total(u), cost];
  }

  private async failed(err: unknown): Promise<Called> {
    const { state, env } = this;
    const charged = total(this.usage);
    if (state.signal.aborted) {
      if (charged > 0) await this.input.chargeAbandoned(charged);
      throw err;
    }
    if (hasErrorCode(err, 'run_cancelled')) return { cancelled: true, charged };
    if (err instanceof RateLimitWait) return { throttled: err, charged };
    if (err instanceof BudgetStopError)
      return { failed: { status: 'budget_exceeded', reason: err.stop.reason }, charged, budget: err.stop.kind };
    if (err instanceof DeadlineError) {
      const stop = wallClockStop(state.spec, env.now(), err.cause !== undefined);
      return { failed: { status: 'budget_exceeded', reason: stop.reason }, charged, budget: stop.kind };
    }
    // A 429/5xx/network failure that named its wait, or that outlasted this delivery's attempts: an outage, waited out
    // by delaying the job.
    const provider = this.provider.name;
    if (err instanceof NamedWait)
      return { unavailable: { provider, retryAfterMs: err.retryable.retryAfterMs }, charged };
    if (isRetryable(err)) return { unavailable: { provider, retryAfterMs: undefined }, charged };
    const code = isAgentError(err) ? err.code : 'model_failed';
    return { failed: { status: 'failed', reason: `${code}: ${(err as Error).message}` }, charged };
  }

  private decided(turn: ModelTurn): Called {
    const { state, env } = this;
    const { spec } = state;
    const usage = this.usage;
    // Missing usage is an error, never zero.
    if (!turn.usage)
      return {
        failed: { status: 'failed', reason: 'missing_usage: the provider reported no token usage' },
        charged: total(usage),
      };
    env.metrics.modelTokens.inc({ tenant: spec.tenant, type: 'prompt' }, usage.promptTokens);
    env.metrics.modelTokens.inc({ tenant: spec.tenant, type: 'completion' }, usage.completionTokens);
    const over = spentCheck(spec, state.used.tokens + total(usage));
    if (over)
      return { failed: { status: 'budget_exceeded', reason: over.reason }, charged: total(usage), budget: over.kind };
    const { final, text } = turn;
    // Before the decision is journalled: a replay reads the ids the calls ran under.
    const toolCalls = distinctCallIds(turn.toolCalls, callIdOf, withCallId);
    if (toolCalls !== turn.toolCalls)
      state.log.warn(
        { code: 'call_ids_made_distinct', provider: this.provider.name, calls: toolCalls.length },
        "the model's answer repeated a tool call's id or gave none: each call given one of its own",
      );
    return {
      decision: {
        v: 1,
        kind: 'decision',
        step: state.step,
        model: this.provider.name,
        toolCalls,
        ...(final !== undefined ? { final } : {}),
        ...(text !== undefined ? { text } : {}),
        usage,
        attempts: this.attempts,
        ...(this.priceVersions.size > 0 ? { cost: { micros: this.cost, prices: [...this.priceVersions] } } : {}),
      },
    };
  }
}

/**
 * The most one attempt of `provider` may cost (µ$) for an estimate of `tokens`: the estimate's input at the dearest
 * input price and the completion cap at the output price; 0 for a model without a price.
 */
export function attemptCostEstimate(
  env: Pick<StepEnv, 'spend' | 'cfg'>,
  provider: Pick<ModelProvider, 'name' | 'defaultModel'>,
  modelId: string | undefined,
  tokens: number,
  nowMs: number,
): number {
  const price = env.spend?.priceAt(provider.name, modelId ?? provider.defaultModel, nowMs);
  if (!price) return 0;
  const cap = env.cfg.COMPLETION_TOKEN_CAP;
  return estimateCost(tokens - cap, cap, price);
}

/**
 * A provider's usage, validated (non-negative safe integers): an invalid one is a provider error, like a missing one.
 */
function validUsage(u: unknown): TokenUsage {
  // The usual case checked by hand (tokenUsageSchema's checks; only these fields are read): zod names a bad field.
  const v = u as Partial<Record<keyof TokenUsage, unknown>> | null | undefined;
  if (
    isTokenCount(v?.promptTokens) &&
    isTokenCount(v?.completionTokens) &&
    (v?.cachedInputTokens === undefined || isTokenCount(v.cachedInputTokens)) &&
    (v?.cacheWriteTokens === undefined || isTokenCount(v.cacheWriteTokens))
  )
    return v as TokenUsage;
  const r = tokenUsageSchema.safeParse(u);
  if (!r.success) {
    const issue = r.error.issues[0];
    throw new TerminalError(
      'invalid_usage',
      `the provider reported an invalid token usage (${issue?.path.join('.')}: ${issue?.message})`,
    );
  }
  return r.data;
}

const callIdOf = (c: ToolCall) => c.id;
const withCallId = (c: ToolCall, id: string): ToolCall => ({ ...c, id });

const isTokenCount = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= 0;
