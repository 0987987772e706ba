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
 * Keys a fleet writes on its own, later than the request that caused them, so a "nothing was written" check does not
 * count them: a running BullMQ worker's `stalled-check` marker (set with a time to live at every stall check), the
 * owner watch's last scan of a queue (`agent-owners`, kept for one pass's period, src/worker/ownerWatch.ts), a
 * worker's money settlements of earlier attempts (a batch every SPEND_FLUSH_MS, src/budget/spend.ts) and an ended
 * run's packed forms (its compaction follows its end, src/runs/compact.ts).
 */
const WRITTEN_ON_ITS_OWN = /:stalled-check$|:agent-owners$|:spend:\{spend\}:|:(events|journal)-packed$/;

/** The keys the prefixes hold now, for a "nothing was written" check (`keysAddedSince`). (On a Cluster client: one node's.) */
export async function keySet(redis: Pick<Redis, 'scan'>, ...prefixes: string[]): Promise<Set<string>> {
  const all = new Set<string>();
  for (const prefix of prefixes) for await (const keys of keysUnder(redis, prefix)) for (const k of keys) all.add(k);
  return all;
}

/**
 * The keys under the prefixes that were not there at `before`, but for what a fleet writes on its own (above): empty
 * when a request wrote nothing. Keys that went meanwhile do not count (a compaction or a time to live removes keys).
 */
export async function keysAddedSince(
  redis: Pick<Redis, 'scan'>,
  before: ReadonlySet<string>,
  ...prefixes: string[]
): Promise<string[]> {
  return [...(await keySet(redis, ...prefixes))].filter((k) => !before.has(k) && !WRITTEN_ON_ITS_OWN.test(k));
}
