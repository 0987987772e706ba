/** Typed call of src/store/lua/flowHold-3.lua: a run that comes back to work takes a slot at once. */
import type { RedisClient } from '../connect.js';
import type { FlowKeys } from '../keys.js';
import { script } from '../luaScripts.js';
import type { FlowRun } from './flowEnqueue.js';

/** Returns whether a slot was taken (false: the run already holds one, or waits in its line). */
export async function flowHold(redis: RedisClient, k: FlowKeys, runId: string, run: FlowRun): Promise<boolean> {
  return (await script(redis, 'flowHold')(k.held, k.counts, k.waiting, runId, JSON.stringify(run))) === 1;
}
