/**
 * Typed call of src/store/lua/foldHistory-3.lua: an ended run's action history folded into its record, its reservation
 * let go.
 */
import { createHash } from 'node:crypto';
import type { RedisClient } from '../connect.js';
import { script } from '../luaScripts.js';

/** The fence on a history list's entries as read: what foldHistory-3.lua computes of the list it finds. */
export function historyDigest(entries: readonly string[]): string {
  const h = createHash('sha1');
  for (const e of entries) h.update(`${Buffer.byteLength(e)}:`).update(e, 'utf8');
  return h.digest('hex');
}

export interface FoldHistoryArgs {
  /** The list's entries (historyDigest) and the record's folded field's sha1 ('' none) as read: the fence. */
  listDigest: string;
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
    a.listDigest,
    a.foldedSha1,
    a.folded,
    a.actionId,
  );
  return res === 1;
}
