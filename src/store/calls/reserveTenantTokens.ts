/** Typed calls of src/store/lua/reserveTenantTokens-1.lua: a tenant's daily token counter. */
import type { RedisClient } from '../connect.js';
import { ScriptCode } from '../codes.js';
import { script } from '../luaScripts.js';

export interface TenantTokensArgs {
  /** The tenant-day counter key. */
  key: string;
  amount: number;
  /** 0 = no limit. */
  dailyLimit: number;
  ttlMs: number;
}

/** Reserves `amount` before a model attempt: false (nothing reserved) when the day would go past the limit. */
export async function reserveTenantTokens(redis: RedisClient, a: TenantTokensArgs): Promise<boolean> {
  const res = await script(redis, 'reserveTenantTokens')(a.key, a.amount, a.dailyLimit, a.ttlMs, 1);
  return res !== ScriptCode.TenantBudgetExceeded;
}

/** Records the real spend (`amount`: usage minus reservation, may be negative). Never refused. */
export async function settleTenantTokens(redis: RedisClient, a: TenantTokensArgs): Promise<void> {
  await script(redis, 'reserveTenantTokens')(a.key, a.amount, a.dailyLimit, a.ttlMs, 0);
}
