/** Typed call of src/store/lua/journalOperator-3.lua: an operator's journal entry and event, one atomic change. */
import type { RedisClient } from '../connect.js';
import type { RunKeys } from '../keys.js';
import { script } from '../luaScripts.js';

/** The journal list's length after the entry. `now`: the time of the change (an ended run is archived again). */
export async function journalOperatorCall(
  redis: RedisClient,
  k: RunKeys,
  a: { entry: string; eventsMaxLen: number; now: number },
): Promise<number> {
  return Number(await script(redis, 'journalOperator')(k.run, k.journal, k.events, a.entry, a.eventsMaxLen, a.now));
}
