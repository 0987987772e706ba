/** Typed call of src/store/lua/spend-1.lua: the money counters and reports of tenants, agents and the fleet. */
import type { RedisClient } from '../connect.js';
import { ScriptCode } from '../codes.js';
import { callScript, type ScriptArg } from '../luaScripts.js';

/** A counter a batch moves, by `delta` µ$ (may be negative: an attempt cost less than it reserved). */
export interface CounterDelta {
  key: string;
  delta: number;
  ttlMs: number;
}

/** Real spend added to a report hash's field (`<tenant> <agent> <provider>/<model>`). */
export interface ReportCost {
  key: string;
  field: string;
  cost: number;
  ttlMs: number;
}

/** Settlements sent together, applied once: `mark` is the batch's own key, set when it is applied. */
export interface SpendBatch {
  mark: string;
  markTtlMs: number;
  counters: readonly CounterDelta[];
  reports: readonly ReportCost[];
}

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
 * Applies `batch` (if any; once, whatever is sent again), then reserves `reserve.amount` on each of its counters:
 * a refusal (nothing reserved) names the counter that would pass its limit. `anyKey` names the {spend} slot when the
 * call carries no batch.
 */
export async function writeSpend(
  redis: RedisClient,
  anyKey: string,
  batch: SpendBatch | undefined,
  reserve?: { amount: number; counters: readonly LimitedCounter[] },
): Promise<SpendRefusal | undefined> {
  const args: ScriptArg[] = [batch?.mark ?? anyKey, batch ? 1 : 0, batch?.markTtlMs ?? 0];
  args.push(batch?.counters.length ?? 0);
  for (const c of batch?.counters ?? []) args.push(c.key, c.delta, c.ttlMs);
  args.push(batch?.reports.length ?? 0);
  for (const r of batch?.reports ?? []) args.push(r.key, r.field, r.cost, r.ttlMs);
  args.push(reserve?.counters.length ?? 0, reserve?.amount ?? 0);
  for (const c of reserve?.counters ?? []) args.push(c.key, c.limit, c.ttlMs);
  const res = (await callScript(redis, 'spend', args)) as [number, number?, number?];
  if (Number(res[0]) !== ScriptCode.TenantBudgetExceeded) return undefined;
  return { index: Number(res[1]) - 1, used: Number(res[2]) };
}
