/** One key namespace per test on a shared Redis: a unique prefix, and its removal afterwards. */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';

/** A prefix no other test uses (KEY_PREFIX; BULL_PREFIX can add a letter to it): `t<name><8 hex>`. */
export function uniquePrefix(name: string): string {
  return `t${name.replace(/[^a-z0-9]/gi, '').slice(0, 10)}${randomBytes(4).toString('hex')}`;
}

/** Deletes every key under `<prefix>:` (SCAN, not KEYS: the Redis may be shared). */
export async function deletePrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length) await redis.del(...keys);
  } while (cursor !== '0');
}
