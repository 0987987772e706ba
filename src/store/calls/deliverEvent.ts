/**
 * Typed call of src/store/lua/deliverEvent-1.lua: an event delivered on a key, to its wait at most once, or kept
 * (`keepMs` 0: never kept).
 */
import type { RedisClient } from '../connect.js';
import { expectReply } from '../codes.js';
import { script } from '../luaScripts.js';

export type DeliverReply =
  | { kind: 'resumed'; runId: string; waitId: string }
  | { kind: 'kept'; expiresAt: number }
  | { kind: 'duplicate' }
  /** `keepMs` 0 and no wait holds the key (or its wait has a delivery already): nothing written. */
  | { kind: 'no_wait' };

export async function deliverEvent(
  redis: RedisClient,
  eventKey: string,
  a: { payload: string; now: number; keepMs: number; eventId?: string | undefined },
): Promise<DeliverReply> {
  const res = await script(redis, 'deliverEvent')(eventKey, a.payload, a.now, a.keepMs, a.eventId ?? '');
  const [kind, x, y] = expectReply(res) as [string, string | number | undefined, string | undefined];
  if (kind === 'resumed') return { kind, runId: String(x), waitId: String(y) };
  if (kind === 'kept') return { kind, expiresAt: Number(x) };
  if (kind === 'no_wait') return { kind };
  return { kind: 'duplicate' };
}
