/**
 * The budget policy, pure: what a step may spend (the run's limits against its
 * usage) and what status it ends in.
 * No Redis, no clock (the time is passed in), no I/O: the step processor and
 * replay apply it, test/unit/budgetPolicy.test.ts holds it.
 *
 * Budgets are run attributes (limits fixed at creation, usage in the run's
 * budget hash). The check runs before every model attempt, retries included:
 * an attempt whose estimate (transcript, run input, tool schemas, instructions, completion cap) could
 * exceed the remaining tokens is never made, nor one past the deadline. After
 * each attempt its billed usage is charged, failed attempts included.
 * Decision record 0007: docs/decisions/0007-budgets-bound-every-attempt.md.
 */
import type { TokenUsage } from '../core/journal.js';
import type { AttemptReach, ToolSpec } from '../core/model.js';
import { countTokens } from '../core/tokens.js';

export type BudgetKind = 'steps' | 'tokens' | 'wall_clock' | 'tenant_tokens' | 'cost' | 'tenant_cost';

export interface BudgetStop {
  kind: BudgetKind;
  reason: string;
}

/** What a run has spent (its limits are what it may spend). */
export interface RunUsage {
  steps: number;
  tokens: number;
  /**
   * UTF-8 bytes of the transcript's decisions and observations, summed by each commit.
   * Every BPE token is at least one byte, so this bounds the transcript's tokens from
   * above at no cost; undefined when unknown (a job from before the field): count exactly.
   */
  contextBytes?: number | undefined;
  /** µ$ the run's model attempts cost (src/core/prices.ts); undefined: none recorded yet (read as 0). */
  cost?: number | undefined;
}

/** What the policy reads of a run: its limits and when it was created (a RunSpec has both). */
export interface Budgeted {
  limits: { maxSteps: number; maxTokens: number; maxWallMs: number; deadlineAt: number; maxCost?: number | undefined };
  createdAt: number;
}

const toolTokens = new WeakMap<readonly ToolSpec[], number>();

/** Prompt tokens of the tools offered (names, descriptions, JSON schemas), counted once per tool list. */
export function toolSchemaTokens(tools: readonly ToolSpec[]): number {
  let n = toolTokens.get(tools);
  if (n === undefined) toolTokens.set(tools, (n = tools.length === 0 ? 0 : countTokens(JSON.stringify(tools))));
  return n;
}

/**
 * What one model attempt may spend, in tokenizer counts (src/core/tokens.ts): the
 * transcript so far (`contextTokens`: exact, or the byte bound `used.contextBytes`), the
 * run's instructions and input (`inputTokens`: the agent's estimateInputTokens, by
 * default its instructions and first message, counted), the tool schemas offered and
 * the completion cap. The engine does not read the input's fields.
 */
export function estimateCallTokens(
  inputTokens: number,
  contextTokens: number,
  completionCap: number,
  tools: readonly ToolSpec[] = [],
): number {
  return contextTokens + inputTokens + toolSchemaTokens(tools) + completionCap;
}

/**
 * The part of the transcript a model call is sent (and its context is counted from): decisions and tool observations.
 */
export function isContext(kind: string): boolean {
  return kind === 'decision' || kind === 'observation';
}

/**
 * Before a step's model call: a step left, and the first attempt's check. `estimate`: estimateCallTokens, computed once
 * per call.
 */
export function preflight(spec: Budgeted, used: RunUsage, estimate: number, nowMs: number): BudgetStop | undefined {
  const { limits } = spec;
  if (used.steps >= limits.maxSteps)
    return { kind: 'steps', reason: `steps: ${used.steps} of ${limits.maxSteps} used` };
  return attemptCheck(spec, used.tokens, estimate, nowMs);
}

/**
 * Before each model attempt, retries included: the deadline has not passed and
 * what the attempt may spend (`estimate`) fits beside what the run has spent
 * (`usedTokens`, the failed attempts of this step included).
 */
export function attemptCheck(
  spec: Budgeted,
  usedTokens: number,
  estimate: number,
  nowMs: number,
): BudgetStop | undefined {
  const { limits } = spec;
  if (nowMs >= limits.deadlineAt) return wallClockStop(spec, nowMs);
  if (usedTokens + estimate > limits.maxTokens) {
    return { kind: 'tokens', reason: `tokens: used ${usedTokens} + estimate ${estimate} > cap ${limits.maxTokens}` };
  }
  return undefined;
}

/**
 * Before each model attempt, beside attemptCheck: the attempt's cost estimate (µ$) fits beside what the run has
 * cost (`usedCost`, this step's failed attempts included). A run without `maxCost` has no money budget.
 */
export function costCheck(spec: Budgeted, usedCost: number, estimate: number): BudgetStop | undefined {
  const cap = spec.limits.maxCost;
  if (cap === undefined || cap === 0 || usedCost + estimate <= cap) return undefined;
  return { kind: 'cost', reason: `cost: used ${usedCost} + estimate ${estimate} > cap ${cap} µ$` };
}

/**
 * What one model attempt is charged, in tokens (its cost is these at the attempt's price), on every ceiling the
 * attempt reserved against (the run's tokens and cost, the tenant's day, the money holds, the spend reports and
 * metrics): the usage it reported; without one (a failed attempt, or an answer without usage), the bound of what the
 * provider may bill for it, by how far it got (`reach`, the provider's judgement; unknown is `answer`):
 * - `none`: the request never reached the model (a refused connection, a 429, a 4xx refusal): nothing;
 * - `prompt`: the model received the request and answered no text (a 5xx): the attempt's estimated prompt tokens;
 * - `answer`: the model may have generated (a stream cut after its 200, a timeout or a reset after the request left,
 *   an answer without a usable usage): the estimated prompt tokens and the request's completion cap.
 * Missing usage is never charged as zero once the request may have reached the model.
 */
export function attemptCharge(
  reported: TokenUsage | undefined,
  reach: AttemptReach | undefined,
  bound: { promptTokens: number; completionTokens: number },
): TokenUsage | undefined {
  if (reported) return reported;
  switch (reach ?? 'answer') {
    case 'none':
      return undefined;
    case 'prompt':
      return { promptTokens: bound.promptTokens, completionTokens: 0 };
    default:
      return { promptTokens: bound.promptTokens, completionTokens: bound.completionTokens };
  }
}

/** After each model attempt: what it did spend. A run past its cap stops (at the cap, the next pre-flight stops it). */
export function spentCheck(spec: Budgeted, usedTokens: number): BudgetStop | undefined {
  if (usedTokens > spec.limits.maxTokens)
    return { kind: 'tokens', reason: `tokens: used ${usedTokens} of cap ${spec.limits.maxTokens}` };
  return undefined;
}

/**
 * The run's wall-clock deadline passed (before a call, or while the step waited
 * on one), or `retryCut`: a retry's backoff would have ended past it.
 */
export function wallClockStop(spec: Budgeted, nowMs: number, retryCut = false): BudgetStop {
  const { limits } = spec;
  const deadline = new Date(limits.deadlineAt).toISOString();
  const what = retryCut ? `a retry would wait past the deadline ${deadline}` : `deadline ${deadline} passed`;
  return {
    kind: 'wall_clock',
    reason: `wall_clock: ${what} (${nowMs - spec.createdAt} ms of ${limits.maxWallMs} used)`,
  };
}

export interface NextStatus {
  status: 'running' | 'completed' | 'budget_exceeded';
  reason: string;
  /** The budget that ended the run, when one did. */
  budget?: BudgetKind;
}

/**
 * The status a step that ran its tools commits: `completed` on a final answer
 * with no tool call; else `budget_exceeded` when the deadline cut its tools
 * short (`wallStop`) or this was the run's last step; else `running`.
 */
export function nextStatus(
  spec: Budgeted,
  used: RunUsage,
  decision: { final?: unknown; toolCalls: readonly unknown[] },
  wallStop: BudgetStop | undefined,
): NextStatus {
  if (decision.final !== undefined && decision.toolCalls.length === 0)
    return { status: 'completed', reason: 'final_answer' };
  if (wallStop) return { status: 'budget_exceeded', reason: wallStop.reason, budget: wallStop.kind };
  if (used.steps + 1 >= spec.limits.maxSteps) {
    return {
      status: 'budget_exceeded',
      reason: `steps: ${used.steps + 1} of ${spec.limits.maxSteps} used`,
      budget: 'steps',
    };
  }
  return { status: 'running', reason: '' };
}
