/**
 * Budgets are run attributes (Redis budget hash, limits fixed at creation).
 * The pre-flight check runs before every model attempt, retries included: an
 * attempt whose estimate (transcript prompt tokens + run input + completion cap)
 * could exceed the remaining tokens is never made, nor one past the deadline.
 * After each attempt its billed usage is charged, failed attempts included.
 */
import { TerminalError } from '../core/errors.js';
import type { RunSpec } from '../runs/spec.js';
import type { RedisClient } from '../store/connect.js';
import { ScriptCode } from '../store/codes.js';
import type { KeySpace } from '../store/keys.js';
import { script } from '../store/scripts.js';

export type BudgetKind = 'steps' | 'tokens' | 'wall_clock' | 'tenant_tokens';

export interface BudgetStop {
  kind: BudgetKind;
  reason: string;
}

export interface Used {
  steps: number;
  tokens: number;
  contextTokens: number;
}

/**
 * What one model attempt may spend: the transcript so far, the run's input and
 * instructions (`inputTokens`: the agent's estimateInputTokens, by default the
 * input's serialized JSON at about 4 bytes a token plus 200) and the completion
 * cap. The engine does not read the input's fields.
 */
export function estimateCallTokens(inputTokens: number, used: Used, completionCap: number): number {
  return used.contextTokens + inputTokens + completionCap;
}

/** Before a step's model call: a step left, and the first attempt's check. `estimate`: estimateCallTokens, computed once per call. */
export function preflight(spec: RunSpec, used: Used, estimate: number, nowMs: number): BudgetStop | undefined {
  const { limits } = spec;
  if (used.steps >= limits.maxSteps) return { kind: 'steps', reason: `steps: ${used.steps} of ${limits.maxSteps} used` };
  return attemptCheck(spec, used.tokens, estimate, nowMs);
}

/**
 * Before each model attempt, retries included: the deadline has not passed and
 * what the attempt may spend (`estimate`) fits beside what the run has spent
 * (`usedTokens`, the failed attempts of this step included).
 */
export function attemptCheck(spec: RunSpec, usedTokens: number, estimate: number, nowMs: number): BudgetStop | undefined {
  const { limits } = spec;
  if (nowMs >= limits.deadlineAt) return wallClockStop(spec, nowMs);
  if (usedTokens + estimate > limits.maxTokens) {
    return { kind: 'tokens', reason: `tokens: used ${usedTokens} + estimate ${estimate} > cap ${limits.maxTokens}` };
  }
  return undefined;
}

/** After each model attempt: what it did spend. A run past its cap stops (at the cap, the next pre-flight stops it). */
export function spentCheck(spec: RunSpec, usedTokens: number): BudgetStop | undefined {
  if (usedTokens > spec.limits.maxTokens) return { kind: 'tokens', reason: `tokens: used ${usedTokens} of cap ${spec.limits.maxTokens}` };
  return undefined;
}

/**
 * The run's wall-clock deadline passed (before a call, or while the step waited
 * on one), or `retryCut`: a retry's backoff would have ended past it.
 */
export function wallClockStop(spec: RunSpec, nowMs: number, retryCut = false): BudgetStop {
  const { limits } = spec;
  const deadline = new Date(limits.deadlineAt).toISOString();
  const what = retryCut ? `a retry would wait past the deadline ${deadline}` : `deadline ${deadline} passed`;
  return { kind: 'wall_clock', reason: `wall_clock: ${what} (${nowMs - spec.createdAt} ms of ${limits.maxWallMs} used)` };
}

/** A budget stopped the step: the run ends `budget_exceeded` with the stop's reason. */
export class BudgetStopError extends TerminalError {
  constructor(readonly stop: BudgetStop) {
    super('budget_exceeded', stop.reason, { kind: stop.kind });
  }
}

/**
 * The tenant's daily token budget (seed 004: a hundred cheap runs must not add
 * up to an expensive morning). Each model attempt's estimate is reserved
 * atomically before it and settled to the attempt's real usage after it; the
 * settlement is recorded even past the limit, and once over, the next
 * reservation is refused.
 */
export class TenantBudget {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: KeySpace,
    private readonly dailyLimit: number,
  ) {}

  get enabled(): boolean {
    return this.dailyLimit > 0;
  }

  private key(tenant: string, nowMs: number): string {
    return this.keys.tenantTokens(tenant, new Date(nowMs).toISOString().slice(0, 10));
  }

  /** Returns a BudgetStop, with the day's figures, when the reservation would exceed the tenant's day. */
  async reserve(tenant: string, amount: number, nowMs: number): Promise<BudgetStop | undefined> {
    if (!this.enabled) return undefined;
    const key = this.key(tenant, nowMs);
    const res = await script(this.redis, 'reserveTenantTokens')(key, amount, this.dailyLimit, TENANT_DAY_TTL_MS, 1);
    if (res === ScriptCode.TenantBudgetExceeded) {
      const used = Number((await this.redis.get(key)) ?? 0);
      return { kind: 'tenant_tokens', reason: `tenant_tokens: ${tenant} used ${used} + estimate ${amount} > ${this.dailyLimit} tokens today` };
    }
    return undefined;
  }

  /** Records the real spend: `delta` = what the attempt used minus what it reserved. Never refused. */
  async settle(tenant: string, delta: number, nowMs: number): Promise<void> {
    if (!this.enabled || delta === 0) return;
    await script(this.redis, 'reserveTenantTokens')(this.key(tenant, nowMs), delta, this.dailyLimit, TENANT_DAY_TTL_MS, 0);
  }
}

const TENANT_DAY_TTL_MS = 48 * 3600_000;
