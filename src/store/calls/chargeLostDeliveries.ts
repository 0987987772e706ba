/** Typed call of src/store/lua/chargeLostDeliveries-4.lua: a step's lost deliveries, each charged one estimate, fenced. */
import type { RedisClient } from '../connect.js';
import { expectReply } from '../codes.js';
import { script } from '../luaScripts.js';

export interface ChargeLostDeliveriesKeys {
  run: string;
  budget: string;
  jobLock: string;
  job: string;
}

export interface ChargeLostDeliveriesArgs {
  token: string;
  step: number;
  jobId: string;
  /** Tokens charged per lost delivery (one attempt's estimate). */
  tokens: number;
  /** µ$ charged per lost delivery (one attempt's cost estimate). */
  cost: number;
}

/**
 * Returns how many deliveries were charged (0: none lost since the last charge, or the step's decision is journalled);
 * throws the FenceError of a fence refusal (lock lost, stale step, run missing or not running).
 */
export async function chargeLostDeliveries(
  redis: RedisClient,
  k: ChargeLostDeliveriesKeys,
  a: ChargeLostDeliveriesArgs,
): Promise<number> {
  const res = await script(redis, 'chargeLostDeliveries')(
    k.run,
    k.budget,
    k.jobLock,
    k.job,
    a.token,
    a.step,
    a.jobId,
    a.tokens,
    a.cost,
  );
  return Number(expectReply(res, { step: a.step }));
}
