/** Typed call of src/store/lua/takeChildOutcome-1.lua: a parent's wake marks a child whose outcome it takes. */
import type { RedisClient } from '../connect.js';
import { ScriptCode, expectReply } from '../codes.js';
import { script } from '../luaScripts.js';

/** `taken`: marked (or gone: nothing to mark); `at_work`: the child works and the parent's deadline has not come. */
export type TakeReply = 'taken' | 'at_work';

export async function takeChildOutcome(
  redis: RedisClient,
  childRunKey: string,
  a: { parentRunId: string; atDeadline: boolean },
): Promise<TakeReply> {
  const res = await script(redis, 'takeChildOutcome')(childRunKey, a.parentRunId, a.atDeadline ? '1' : '0');
  if (res === ScriptCode.RunMissing) return 'taken';
  return expectReply(res, { runKey: childRunKey }) === 1 ? 'taken' : 'at_work';
}
