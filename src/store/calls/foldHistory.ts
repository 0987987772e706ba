/**
 * Typed call of src/store/lua/foldHistory-3.lua: an ended run's action history folded into its record, its reservation
 * let go.
 */
import type { RedisClient } from '../connect.js';
import { script } from '../luaScripts.js';

export interface FoldHistoryArgs {
  /** The list's length and the record's folded field's sha1 ('' none) as read: the fence. */
  listLength: number;
  foldedSha1: string;
  /** Every move read, folded (src/store/ledgerHistory.ts); '' leaves the history as it is. */
  folded: string;
  /** The record's reservation key (its `reservationKey`) and the action's id. */
  reservation: string;
  actionId: string;
}

/** True when folded; false when either changed since read or the record is gone (nothing written). */
export async function foldHistoryCall(
  redis: RedisClient,
  actionKey: string,
  historyKey: string,
  a: FoldHistoryArgs,
): Promise<boolean> {
  const res = await script(redis, 'foldHistory')(
    actionKey,
    historyKey,
    a.reservation,
    a.listLength,
    a.foldedSha1,
    a.folded,
    a.actionId,
  );
  return res === 1;
}
