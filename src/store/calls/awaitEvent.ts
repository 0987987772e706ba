/** Typed call of src/store/lua/awaitEvent-1.lua: a run starts waiting for an event on a key (its own hash tag). */
import type { RedisClient } from '../connect.js';
import { expectReply } from '../codes.js';
import { script } from '../luaScripts.js';

export type AwaitReply = { kind: 'delivered'; payload: string } | { kind: 'waiting' } | { kind: 'busy' };

export async function awaitEvent(
  redis: RedisClient,
  eventKey: string,
  a: { waitId: string; runId: string; at: number; now: number; keepMs: number },
): Promise<AwaitReply> {
  const res = await script(redis, 'awaitEvent')(eventKey, a.waitId, a.runId, a.at, a.now, a.keepMs);
  const [kind, payload] = expectReply(res) as [string, string | undefined];
  if (kind === 'delivered') return { kind, payload: payload ?? 'null' };
  return { kind: kind === 'busy' ? 'busy' : 'waiting' };
}
