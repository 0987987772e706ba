/** Typed call of src/store/lua/foldHistory-2.lua: an ended run's action history folded into its record. */
import type { RedisClient } from '../connect.js';
import { script } from '../luaScripts.js';

export interface FoldHistoryArgs {
  /** The list's length and the record's folded field's sha1 ('' none) as read: the fence. */
  listLength: number;
  foldedSha1: string;
  /** Every move read, folded (src/store/ledgerHistory.ts). */
  folded: string;
}

/** True when folded; false when either changed since read or the record is gone (nothing written). */
export async function foldHistoryCall(
  redis: RedisClient,
  actionKey: string,
  historyKey: string,
  a: FoldHistoryArgs,
): Promise<boolean> {
  const res = await script(redis, 'foldHistory')(actionKey, historyKey, a.listLength, a.foldedSha1, a.folded);
  return res === 1;
}
