/** One key namespace per test on a shared Redis: a unique prefix, and its removal afterwards. */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';

/** A prefix no other test uses (KEY_PREFIX; BULL_PREFIX can add a letter to it): `t<name><8 hex>`. */
export function uniquePrefix(name: string): string {
  return `t${name.replace(/[^a-z0-9]/gi, '').slice(0, 10)}${randomBytes(4).toString('hex')}`;
}

/** The keys under `<prefix>:`, a SCAN page at a time (SCAN, not KEYS: the Redis may be shared). */
async function* keysUnder(redis: Pick<Redis, 'scan'>, prefix: string): AsyncGenerator<string[]> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length) yield keys;
  } while (cursor !== '0');
}

/** Deletes every key under `<prefix>:`. */
export async function deletePrefix(redis: Redis, prefix: string): Promise<void> {
  for await (const keys of keysUnder(redis, prefix)) await redis.del(...keys);
}

/**
 * How many keys the prefixes hold, for "nothing was written" checks. A running BullMQ worker sets its queue's
 * `stalled-check` marker with a time to live at every stall check and lets it expire: it comes and goes on its own,
 * so it is not counted. (On a Cluster client: one node's keys.)
 */
export async function countKeys(redis: Pick<Redis, 'scan'>, ...prefixes: string[]): Promise<number> {
  let n = 0;
  for (const prefix of prefixes)
    for await (const keys of keysUnder(redis, prefix)) n += keys.filter((k) => !k.endsWith(':stalled-check')).length;
  return n;
}
