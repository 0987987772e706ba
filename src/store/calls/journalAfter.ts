/** Typed call of src/store/lua/journalAfter-1.lua: a journal's entries after the first n, and the entry at n. */
import type { RedisClient } from '../connect.js';
import { scriptBytes } from '../luaScripts.js';

/** As stored (JSON, or compressed behind a marker byte): `last` the entry at n - 1 (null when there is none). */
export async function journalAfter(
  redis: RedisClient,
  journalKey: string,
  n: number,
): Promise<{ last: Buffer | null; after: Buffer[] }> {
  const [last, after] = (await scriptBytes(redis, 'journalAfter')(journalKey, n)) as [Buffer | null, Buffer[]];
  return { last, after };
}
