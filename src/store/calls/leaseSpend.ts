/** Typed call of src/store/lua/leaseSpend-1.lua: a worker's lease of money on the counters with a limit. */
import type { RedisClient } from '../connect.js';
import { ScriptCode } from '../codes.js';
import { callScript, type ScriptArg } from '../luaScripts.js';

/** A counter with a limit that a lease takes its amount on. */
export interface LimitedCounter {
  key: string;
  limit: number;
  ttlMs: number;
}

/** Which counter refused a lease (its index in the lease's counters), and its total then. */
export interface SpendRefusal {
  index: number;
  used: number;
}

/** What a lease asks for, in µ$. */
export interface LeaseAsk {
  /** Given back first: the unused rest of the worker's previous lease on the same counters. */
  back: number;
  /** The least amount leased: refused when a counter has no room for it. */
  need: number;
  /** The most amount leased. */
  want: number;
  /** A lease above `need` takes at most 1/share of the least room left. */
  share: number;
  /** At least one. */
  counters: readonly LimitedCounter[];
}

/** Leases between `need` and `want` µ$ on each of the counters: the amount, or a refusal (nothing leased). */
export async function leaseSpend(
  redis: RedisClient,
  ask: LeaseAsk,
): Promise<{ amount: number } | { refused: SpendRefusal }> {
  const args: ScriptArg[] = [ask.counters[0]!.key, ask.back, ask.need, ask.want, ask.share];
  for (const c of ask.counters) args.push(c.key, c.limit, c.ttlMs);
  const res = await callScript(redis, 'leaseSpend', args);
  if (Array.isArray(res) && Number(res[0]) === ScriptCode.TenantBudgetExceeded)
    return { refused: { index: Number(res[1]) - 1, used: Number(res[2]) } };
  return { amount: Number(res) };
}
