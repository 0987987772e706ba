/** Typed call of src/store/lua/releaseEventWait-1.lua: the key of a wait whose run ended, freed (CAS on the wait id). */
import type { RedisClient } from '../connect.js';
import { expectReply } from '../codes.js';
import { script } from '../luaScripts.js';

/** Whether the key held this wait (waiting, or with a delivery it never took) and is free now. */
export async function releaseEventWait(redis: RedisClient, eventKey: string, waitId: string): Promise<boolean> {
  return Number(expectReply(await script(redis, 'releaseEventWait')(eventKey, waitId))) === 1;
}
