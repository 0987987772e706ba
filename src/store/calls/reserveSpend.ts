/** Typed call of src/store/lua/reserveSpend-1.lua: an attempt's cost estimate on the money counters with a limit. */
import type { RedisClient } from '../connect.js';
import { ScriptCode } from '../codes.js';
import { callScript, type ScriptArg } from '../luaScripts.js';

/** A counter with a limit that a reservation takes its amount on. */
export interface LimitedCounter {
  key: string;
  limit: number;
  ttlMs: number;
}

/** Which counter refused a reservation (its index in the reservation's counters), and its total then. */
export interface SpendRefusal {
  index: number;
  used: number;
}

/**
 * Reserves `amount` µ$ on each of `counters` (at least one): a refusal (nothing reserved) names the counter that
 * would pass its limit.
 */
export async function reserveSpend(
  redis: RedisClient,
  amount: number,
  counters: readonly LimitedCounter[],
): Promise<SpendRefusal | undefined> {
  const args: ScriptArg[] = [counters[0]!.key, amount];
  for (const c of counters) args.push(c.key, c.limit, c.ttlMs);
  const res = await callScript(redis, 'reserveSpend', args);
  if (!Array.isArray(res) || Number(res[0]) !== ScriptCode.TenantBudgetExceeded) return undefined;
  return { index: Number(res[1]) - 1, used: Number(res[2]) };
}
