/** Typed call of src/store/lua/ledgerReplayGuard-2.lua: may a same-key replay of an action driven for the model leave? */
import type { RedisClient } from '../connect.js';
import { ScriptCode, scriptError } from '../codes.js';
import { script } from '../luaScripts.js';

export interface LedgerReplayGuardKeys {
  action: string;
  /** The run's hash (its cancelRequested flag). */
  run: string;
}

/**
 * `clear` (the action is in the expected state and the run's cancel is not recorded), or `conflict` with the state
 * found. A recorded cancel throws CancelledError (with `cancelReason`); any other refusal its typed error.
 */
export type LedgerReplayGuardReply = { clear: true } | { clear: false; actual: string };

export async function ledgerReplayGuard(
  redis: RedisClient,
  k: LedgerReplayGuardKeys,
  a: { actionId: string; expected: string },
): Promise<LedgerReplayGuardReply> {
  const [code, actual, cancelReason] = (await script(redis, 'ledgerReplayGuard')(k.action, k.run, a.expected)) as [
    number,
    string,
    string?,
  ];
  if (code === 1) return { clear: true };
  if (code === ScriptCode.StateMismatch) return { clear: false, actual };
  throw scriptError(code, {
    actionId: a.actionId,
    expected: a.expected,
    actual,
    ...(cancelReason !== undefined ? { cancelReason } : {}),
  });
}
