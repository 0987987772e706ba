/** Typed call of src/store/lua/actionHistory-2.lua: an action's folded moves and its history list, in one read. */
import type { RedisClient } from '../connect.js';
import { script } from '../luaScripts.js';

/** As stored: the record's folded moves (null when none were folded) and the list's moves (JSON each), oldest first. */
export async function actionHistory(
  redis: RedisClient,
  actionKey: string,
  historyKey: string,
  foldedField: string,
): Promise<{ folded: string | null; listed: string[] }> {
  const [folded, listed] = (await script(redis, 'actionHistory')(actionKey, historyKey, foldedField)) as [
    string | null,
    string[],
  ];
  return { folded, listed };
}
