/**
 * Typed call of src/store/lua/deliverEvent-2.lua: an event delivered on a key, to its wait at most once, or kept
 * (`keepMs` 0: never kept); the same event id again is answered as the first time.
 */
import type { RedisClient } from '../connect.js';
import { expectReply } from '../codes.js';
import { script } from '../luaScripts.js';

export type DeliverReply =
  | { kind: 'resumed'; runId: string; waitId: string; seen?: true }
  | { kind: 'kept'; expiresAt: number; seen?: true }
  | { kind: 'duplicate' }
  /** `keepMs` 0 and no wait holds the key (or its wait has a delivery already): nothing written. */
  | { kind: 'no_wait' };

type DeliverKeys = { event: string; eventId: string };
type DeliverArgs = { payload: string; now: number; keepMs: number; eventId?: string | undefined; eventIdTtlMs: number };

export function deliverEvent(redis: RedisClient, keys: DeliverKeys, a: DeliverArgs): Promise<DeliverReply> {
  return call(redis, keys, a, false) as Promise<DeliverReply>;
}

/**
 * deliverEvent, except that a key a wait holds is answered `held` with nothing written: its holder's run is checked
 * first (it is on another slot), then deliverEvent is called. A key no wait holds is answered in this one request.
 */
export function deliverUnlessHeld(
  redis: RedisClient,
  keys: DeliverKeys,
  a: DeliverArgs,
): Promise<DeliverReply | { kind: 'held' }> {
  return call(redis, keys, a, true);
}

async function call(
  redis: RedisClient,
  keys: DeliverKeys,
  a: DeliverArgs,
  holderFirst: boolean,
): Promise<DeliverReply | { kind: 'held' }> {
  const res = await script(redis, 'deliverEvent')(
    keys.event,
    keys.eventId,
    a.payload,
    a.now,
    a.keepMs,
    a.eventId ?? '',
    a.eventIdTtlMs,
    holderFirst ? '1' : '',
  );
  const reply = expectReply(res) as string[];
  const seen = reply[0] === 'seen';
  const [kind, x, y] = seen ? reply.slice(1) : reply;
  const mark = seen ? { seen: true as const } : {};
  if (kind === 'resumed') return { kind, runId: String(x), waitId: String(y), ...mark };
  if (kind === 'kept') return { kind, expiresAt: Number(x), ...mark };
  if (kind === 'no_wait' || kind === 'held') return { kind };
  return { kind: 'duplicate' };
}
