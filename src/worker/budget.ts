/**
 * Budgets are run attributes (Redis budget hash, limits fixed at creation).
 * The pre-flight check runs before every model call: a call whose estimate
 * (transcript prompt tokens + ticket + completion cap) could exceed the
 * remaining tokens is never made.
 */
import type { RunSpec } from '../producer/schemas.js';

export type BudgetKind = 'steps' | 'tokens' | 'wall_clock';

export interface BudgetStop {
  kind: BudgetKind;
  reason: string;
}

export interface Used {
  steps: number;
  tokens: number;
  contextTokens: number;
}

export function estimateCallTokens(spec: RunSpec, used: Used, completionCap: number): number {
  const ticketTokens = Math.ceil(Buffer.byteLength(spec.ticket.subject + spec.ticket.body) / 4) + 200;
  return used.contextTokens + ticketTokens + completionCap;
}

export function preflight(spec: RunSpec, used: Used, nowMs: number, completionCap: number): BudgetStop | undefined {
  const { limits } = spec;
  if (used.steps >= limits.maxSteps) return { kind: 'steps', reason: `steps: ${used.steps} of ${limits.maxSteps} used` };
  if (nowMs >= limits.deadlineAt) return { kind: 'wall_clock', reason: `wall_clock: deadline ${new Date(limits.deadlineAt).toISOString()} passed` };
  const estimate = estimateCallTokens(spec, used, completionCap);
  if (used.tokens + estimate > limits.maxTokens) {
    return { kind: 'tokens', reason: `tokens: used ${used.tokens} + estimate ${estimate} > cap ${limits.maxTokens}` };
  }
  return undefined;
}
