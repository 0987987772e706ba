/** Typed call of src/store/lua/journalRange-2.lua: a run's packed journal and a range of its list, in one read. */
import type { RedisClient } from '../connect.js';
import { scriptBytes } from '../luaScripts.js';

/** As stored: the packed journal (null when there is none) and the list's entries `start`..`stop` (LRANGE's). */
export async function journalRange(
  redis: RedisClient,
  k: { journal: string; journalPacked: string },
  start: number,
  stop: number,
): Promise<{ packed: Buffer | null; listed: Buffer[] }> {
  const [packed, listed] = (await scriptBytes(redis, 'journalRange')(k.journalPacked, k.journal, start, stop)) as [
    Buffer | null,
    Buffer[],
  ];
  return { packed, listed };
}
