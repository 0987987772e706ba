/** Typed call of src/store/lua/settleEventWait-1.lua: a wake job settles its wait, the delivery or the timeout. */
import type { RedisClient } from '../connect.js';
import { expectReply } from '../codes.js';
import { script } from '../luaScripts.js';

export type SettleReply = { kind: 'delivered'; payload: string } | { kind: 'timed_out' } | { kind: 'early' };

export async function settleEventWait(
  redis: RedisClient,
  eventKey: string,
  a: { waitId: string; now: number; at: number },
): Promise<SettleReply> {
  const res = await script(redis, 'settleEventWait')(eventKey, a.waitId, a.now, a.at);
  const [kind, payload] = expectReply(res) as [string, string | undefined];
  if (kind === 'delivered') return { kind, payload: payload ?? 'null' };
  return { kind: kind === 'early' ? 'early' : 'timed_out' };
}
