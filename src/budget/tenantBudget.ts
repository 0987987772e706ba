/**
 * Budgets with Redis: the tenant's daily token budget, and the error a budget
 * stop travels in. The pure checks (pre-flight, each attempt, after it, the
 * deadline) are in src/budget/policy.ts.
 * Decision record 0008: docs/decisions/0008-the-wall-clock-bounds-every-wait.md.
 */
import { TerminalError } from '../core/errors.js';
import type { BudgetStop } from './policy.js';
import type { RedisClient } from '../store/connect.js';
import type { KeySpace } from '../store/keys.js';
import { reserveTenantTokens, settleTenantTokens } from '../store/calls/reserveTenantTokens.js';

export {
  attemptCharge,
  attemptCheck,
  costCheck,
  estimateCallTokens,
  isContext,
  preflight,
  spentCheck,
  wallClockStop,
  type BudgetKind,
  type BudgetStop,
  type RunUsage,
  toolSchemaTokens,
} from './policy.js';

/** A budget stopped the step: the run ends `budget_exceeded` with the stop's reason. */
export class BudgetStopError extends TerminalError {
  constructor(readonly stop: BudgetStop) {
    super('budget_exceeded', stop.reason, { kind: stop.kind });
  }
}

/**
 * The tenant's daily token budget (a hundred cheap runs must not add up to an
 * expensive morning). Each model attempt's estimate is reserved
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
    if (
      !(await reserveTenantTokens(this.redis, { key, amount, dailyLimit: this.dailyLimit, ttlMs: TENANT_DAY_TTL_MS }))
    ) {
      const used = Number((await this.redis.get(key)) ?? 0);
      return {
        kind: 'tenant_tokens',
        reason: `tenant_tokens: ${tenant} used ${used} + estimate ${amount} > ${this.dailyLimit} tokens today`,
      };
    }
    return undefined;
  }

  /**
   * Records the real spend: `delta` = what the attempt used minus what it reserved, on the day of the reservation
   * (`reservedAtMs`, the time given to reserve), whenever the attempt ends. Never refused.
   */
  async settle(tenant: string, delta: number, reservedAtMs: number): Promise<void> {
    if (!this.enabled || delta === 0) return;
    await settleTenantTokens(this.redis, {
      key: this.key(tenant, reservedAtMs),
      amount: delta,
      dailyLimit: this.dailyLimit,
      ttlMs: TENANT_DAY_TTL_MS,
    });
  }
}

const TENANT_DAY_TTL_MS = 48 * 3600_000;
