/** Typed call of src/store/lua/createRun-13.lua: a run and its first step job in one atomic change. */
import type { RedisClient } from '../connect.js';
import type { CapturedAdd } from '../bullmqInternals.js';
import { script } from '../scripts.js';

export interface CreateRunKeys {
  run: string;
  budget: string;
  events: string;
  /** The shard's run index. */
  runIndex: string;
}

export interface CreateRunArgs {
  runId: string;
  now: number;
  /** Run hash fields, all strings (Lua's cjson would turn numbers into doubles). */
  run: Record<string, string>;
  budget: Record<string, string>;
  /** The `created` event (JSON). */
  event: string;
  eventsMaxLen: number;
  /** BullMQ's addStandardJob of step 1's job (captureAddStandardJob). */
  firstJob: CapturedAdd;
}

/** true: created; false: the run already existed (nothing written). */
export async function createRun(redis: RedisClient, k: CreateRunKeys, a: CreateRunArgs): Promise<boolean> {
  const res = await script(redis, 'createRun')(
    k.run, k.budget, k.events, k.runIndex, ...a.firstJob.keys,
    a.runId, a.now, JSON.stringify(a.run), JSON.stringify(a.budget), a.event, a.eventsMaxLen, ...a.firstJob.argv,
  );
  return res === 1;
}
