/** Typed call of src/store/lua/chargeTokens-3.lua: charge a handed-back step's spent tokens, fenced like the commit. */
import type { RedisClient } from '../connect.js';
import { expectReply } from '../codes.js';
import { script } from '../luaScripts.js';

export interface ChargeTokensKeys {
  run: string;
  budget: string;
  jobLock: string;
}

export interface ChargeTokensArgs {
  token: string;
  step: number;
  jobId: string;
  tokens: number;
  /** Their cost in µ$. */
  cost?: number | undefined;
}

/**
 * Returns the run's new tokensUsed; throws the FenceError of a fence refusal (lock lost, stale step, run missing or not
 * running).
 */
export async function chargeTokens(redis: RedisClient, k: ChargeTokensKeys, a: ChargeTokensArgs): Promise<number> {
  const res = await script(redis, 'chargeTokens')(
    k.run,
    k.budget,
    k.jobLock,
    a.token,
    a.step,
    a.jobId,
    a.tokens,
    a.cost ?? 0,
  );
  return Number(expectReply(res, { step: a.step }));
}
