/**
 * Money budgets with Redis: the spend of tenants (per UTC day and month), agents (per day) and the fleet (per
 * month), in µ$ (src/core/prices.ts). Like the tenant's token day (tenantBudget.ts), each model attempt's cost
 * estimate is reserved atomically before it (refused when a counter would pass its limit: the run stops
 * `budget_exceeded`, reason naming the cost, before the call) and settled to its real cost after it, failed
 * attempts included; the settlement is recorded even past a limit.
 *
 * Bound: the sum of real costs never passes a limit by more than what attempts cost above their estimates (the
 * estimate prices every input token at the dearest input price and the whole completion cap, so only a provider
 * counting more input tokens than the engine's tokenizer estimated can do so). An attempt whose worker died after
 * its reservation leaves the reservation charged (never less than the attempt cost, if it was made).
 */
import type { BudgetStop } from './policy.js';
import { PriceTable, type Price, type PriceEntry } from '../core/prices.js';
import type { RedisClient } from '../store/connect.js';
import type { KeySpace } from '../store/keys.js';
import { reserveSpend, settleSpend, type SpendLimits } from '../store/calls/reserveSpend.js';

/** What the money budgets read of the configuration (src/config/config.ts documents each). */
export interface SpendOptions {
  readonly MODEL_PRICES: readonly PriceEntry[];
  readonly TENANT_DAILY_COST: number;
  readonly TENANT_MONTHLY_COST: number;
  readonly AGENT_DAILY_COST: number;
  readonly FLEET_MONTHLY_COST: number;
}

/** Who an attempt's money is charged to. */
export interface SpendScope {
  tenant: string;
  agent: string;
  provider: string;
  model: string;
}

const DAY_TTL_MS = 48 * 3600_000;
const MONTH_TTL_MS = 62 * 24 * 3600_000;

const COUNTER_NAMES: Record<keyof SpendLimits, string> = {
  tenantDay: 'tenant today',
  tenantMonth: 'tenant this month',
  agentDay: 'agent today',
  fleetMonth: 'fleet this month',
};

export class SpendBudget {
  readonly prices: PriceTable;
  private readonly limits: SpendLimits;

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: KeySpace,
    opts: SpendOptions,
  ) {
    this.prices = new PriceTable(undefined, opts.MODEL_PRICES);
    this.limits = {
      tenantDay: opts.TENANT_DAILY_COST,
      tenantMonth: opts.TENANT_MONTHLY_COST,
      agentDay: opts.AGENT_DAILY_COST,
      fleetMonth: opts.FLEET_MONTHLY_COST,
    };
  }

  /** Whether any tenant, agent or fleet money limit is set. */
  get limited(): boolean {
    return Object.values(this.limits).some((l) => l > 0);
  }

  priceAt(provider: string, model: string | undefined, nowMs: number): Price | undefined {
    return this.prices.priceAt(provider, model, nowMs);
  }

  private keysOf(s: SpendScope, nowMs: number) {
    const day = new Date(nowMs).toISOString().slice(0, 10);
    return this.keys.spend(s.tenant, s.agent, day, day.slice(0, 7));
  }

  /** Reserves an attempt's estimate; a BudgetStop (kind `tenant_cost`) naming the counter when a limit would pass. */
  async reserve(s: SpendScope, estimate: number, nowMs: number): Promise<BudgetStop | undefined> {
    const refused = await reserveSpend(this.redis, this.keysOf(s, nowMs), estimate, this.limits, {
      dayMs: DAY_TTL_MS,
      monthMs: MONTH_TTL_MS,
    });
    if (!refused) return undefined;
    const who = refused.counter.startsWith('tenant') ? s.tenant : refused.counter === 'agentDay' ? s.agent : 'fleet';
    return {
      kind: 'tenant_cost',
      reason:
        `cost: ${who} (${COUNTER_NAMES[refused.counter]}) used ${refused.used} + estimate ${estimate} > ` +
        `${this.limits[refused.counter]} µ$`,
    };
  }

  /** Records an attempt's real cost (the reservation `reserved` given back). Never refused. */
  async settle(s: SpendScope, cost: number, reserved: number, nowMs: number): Promise<void> {
    if (cost === 0 && reserved === 0) return;
    await settleSpend(
      this.redis,
      this.keysOf(s, nowMs),
      { delta: cost - reserved, cost, field: `${s.tenant} ${s.agent} ${s.provider}/${s.model}` },
      this.limits,
      { dayMs: DAY_TTL_MS, monthMs: MONTH_TTL_MS },
    );
  }
}

/** One line of a spend report: who spent what (µ$) on which model. */
export interface SpendLine {
  tenant: string;
  agent: string;
  model: string;
  micros: number;
}

/**
 * The real spend of a UTC day (`YYYY-MM-DD`) or month (`YYYY-MM`) by tenant, agent and model, largest first, with its
 * total: the settled costs of every model attempt (reservations of attempts whose worker died are not in it).
 */
export async function readSpendReport(
  redis: RedisClient,
  keys: KeySpace,
  period: string,
): Promise<{ period: string; currency: 'USD'; unit: 'micros'; totalMicros: number; lines: SpendLine[] }> {
  const key = keys.spendReports(period, period).dayReport;
  const raw = await redis.hgetall(key);
  const lines = Object.entries(raw)
    .map(([field, v]) => {
      const [tenant = '', agent = '', model = ''] = field.split(' ');
      return { tenant, agent, model, micros: Number(v) };
    })
    .sort((a, b) => b.micros - a.micros || a.tenant.localeCompare(b.tenant));
  return { period, currency: 'USD', unit: 'micros', totalMicros: lines.reduce((n, l) => n + l.micros, 0), lines };
}
