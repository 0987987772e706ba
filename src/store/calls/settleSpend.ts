/** Typed call of src/store/lua/settleSpend-1.lua: model attempts' spend on the money counters and reports. */
import type { RedisClient } from '../connect.js';
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

/** Applies a batch of settlements, once: false when it had been applied before (the same batch sent again). */
export async function settleSpend(redis: RedisClient, batch: SpendBatch): Promise<boolean> {
  const args: ScriptArg[] = [batch.mark, batch.markTtlMs, batch.counters.length];
  for (const c of batch.counters) args.push(c.key, c.delta, c.ttlMs);
  args.push(batch.reports.length);
  for (const r of batch.reports) args.push(r.key, r.field, r.cost, r.ttlMs);
  return Number(await callScript(redis, 'settleSpend', args)) === 1;
}
