/**
 * Every write to one Redis database, seen as it happens: keyspace notifications (`notify-keyspace-events`, key
 * events of every type) on a pattern subscription. A request's writes are the events between its start and a
 * PING answered on the subscriber connection after its response: Redis publishes a write's event before it
 * answers the write, and answers one connection in order, so nothing the request wrote can arrive after the PONG.
 */
import { Redis } from 'ioredis';
import { until } from '../../../testkit/until.js';

/** Events that are not writes of a request: Redis's own expiry and eviction. */
const NOT_WRITES = new Set(['expired', 'evicted']);

export interface WriteWatch {
  /** Starts a window; returns the writes seen since, once every write made before the call to end() is in. */
  window(): { end(): Promise<string[]> };
  /** Waits until nothing was written for `quietMs` (work a request left running), at most `maxMs`. */
  settle(quietMs: number, maxMs: number): Promise<void>;
  close(): Promise<void>;
}

export async function watchWrites(url: string, db: number): Promise<WriteWatch> {
  const admin = new Redis(url, { db });
  const previous = ((await admin.config('GET', 'notify-keyspace-events')) as string[])[1] ?? '';
  await admin.config('SET', 'notify-keyspace-events', 'EA');
  const sub = new Redis(url, { db });
  let seen: string[] = [];
  let lastAt = Date.now();
  sub.on('pmessage', (_pattern: string, channel: string, key: string) => {
    const event = channel.slice(channel.indexOf(':') + 1);
    if (NOT_WRITES.has(event)) return;
    seen.push(`${event} ${key}`);
    lastAt = Date.now();
  });
  await sub.psubscribe(`__keyevent@${db}__:*`);
  return {
    window() {
      seen = [];
      return {
        end: async () => {
          await sub.ping();
          return seen;
        },
      };
    },
    async settle(quietMs, maxMs) {
      // The ping returns once every write sent before it was seen; quiet for quietMs, at most maxMs.
      const quiet = async () => (await sub.ping(), Date.now() - lastAt >= quietMs);
      await until(`${quietMs} ms without a write`, maxMs, quiet, quietMs / 2).catch(() => {});
    },
    async close() {
      sub.disconnect();
      await admin.config('SET', 'notify-keyspace-events', previous);
      admin.disconnect();
    },
  };
}
