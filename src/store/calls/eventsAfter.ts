/** Typed call of src/store/lua/eventsAfter-2.lua: a run's packed events and its stream from a position, in one read. */
import type { RedisClient } from '../connect.js';
import { scriptBytes } from '../luaScripts.js';

/** As stored: the packed events (null when there are none) and up to `count` stream entries from `start`. */
export async function eventsAfter(
  redis: RedisClient,
  k: { events: string; eventsPacked: string },
  start: string,
  count: number,
): Promise<{ packed: Buffer | null; entries: [Buffer, Buffer[]][] }> {
  const [packed, entries] = (await scriptBytes(redis, 'eventsAfter')(k.eventsPacked, k.events, start, count)) as [
    Buffer | null,
    [Buffer, Buffer[]][],
  ];
  return { packed, entries };
}
