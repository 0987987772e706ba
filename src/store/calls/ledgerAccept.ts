/** Typed call of src/store/lua/ledgerAccept-3.lua: an operator's `accept` of an original whose compensation was refused. */
import type { RedisClient } from '../connect.js';
import { ScriptCode, scriptError } from '../codes.js';
import { script } from '../luaScripts.js';

export interface LedgerAcceptKeys {
  action: string;
  history: string;
  /** The shard's human queue. */
  humanQueue: string;
}

/** recorded (and out of the queue), not_queued (nothing written), or conflict with the state found. */
export type LedgerAcceptReply = { outcome: 'recorded' | 'not_queued' } | { outcome: 'conflict'; actual: string };

export async function ledgerAccept(
  redis: RedisClient,
  k: LedgerAcceptKeys,
  a: { actionId: string; compensation: string; history: unknown; retentionMs?: number | undefined; now: number },
): Promise<LedgerAcceptReply> {
  const [code, actual] = (await script(redis, 'ledgerAccept')(
    k.action,
    k.history,
    k.humanQueue,
    a.actionId,
    a.compensation,
    JSON.stringify(a.history),
    a.retentionMs ?? '',
    a.now,
  )) as [number, string];
  if (code === 1) return { outcome: 'recorded' };
  if (code === 2) return { outcome: 'not_queued' };
  if (code === ScriptCode.StateMismatch) return { outcome: 'conflict', actual };
  throw scriptError(code, { actionId: a.actionId, actual });
}
