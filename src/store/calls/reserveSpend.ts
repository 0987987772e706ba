/** Typed calls of src/store/lua/reserveSpend-6.lua: the money counters of tenants, agents and the fleet. */
import type { RedisClient } from '../connect.js';
import { script } from '../luaScripts.js';

export interface SpendKeys {
  tenantDay: string;
  tenantMonth: string;
  agentDay: string;
  fleetMonth: string;
  dayReport: string;
  monthReport: string;
}

/** The limits of the four counters, in µ$ (0 = none), in the keys' order. */
export interface SpendLimits {
  tenantDay: number;
  tenantMonth: number;
  agentDay: number;
  fleetMonth: number;
}

export interface SpendTtls {
  dayMs: number;
  monthMs: number;
}

/** Which counter refused a reservation, and its total then. */
export interface SpendRefusal {
  counter: keyof SpendLimits;
  used: number;
}

const COUNTERS: readonly (keyof SpendLimits)[] = ['tenantDay', 'tenantMonth', 'agentDay', 'fleetMonth'];

function keysOf(k: SpendKeys): string[] {
  return [k.tenantDay, k.tenantMonth, k.agentDay, k.fleetMonth, k.dayReport, k.monthReport];
}

function limitsOf(l: SpendLimits): number[] {
  return COUNTERS.map((c) => l[c]);
}

/** Reserves `amount` µ$ before a model attempt; a refusal (nothing reserved) names the counter past its limit. */
export async function reserveSpend(
  redis: RedisClient,
  k: SpendKeys,
  amount: number,
  limits: SpendLimits,
  ttl: SpendTtls,
): Promise<SpendRefusal | undefined> {
  const res = (await script(redis, 'reserveSpend')(
    ...keysOf(k),
    amount,
    ...limitsOf(limits),
    1,
    ttl.dayMs,
    ttl.monthMs,
    '',
    0,
  )) as [number, number, number?];
  if (Number(res[0]) === 0) return undefined;
  return { counter: COUNTERS[Number(res[1]) - 1]!, used: Number(res[2]) };
}

/**
 * Records an attempt's real cost: `delta` (cost minus reservation) on the counters, `cost` on the reports under
 * `field`. Never refused.
 */
export async function settleSpend(
  redis: RedisClient,
  k: SpendKeys,
  a: { delta: number; cost: number; field: string },
  limits: SpendLimits,
  ttl: SpendTtls,
): Promise<void> {
  await script(redis, 'reserveSpend')(
    ...keysOf(k),
    a.delta,
    ...limitsOf(limits),
    0,
    ttl.dayMs,
    ttl.monthMs,
    a.field,
    a.cost,
  );
}
