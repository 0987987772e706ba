/** Typed call of src/store/lua/flowRelease-5.lua: a run's slot given back, or the run out of its line. */
import type { RedisClient } from '../connect.js';
import type { FlowKeys } from '../keys.js';
import { script } from '../luaScripts.js';
import type { SlotGeneration } from './flowEnqueue.js';

export type Released = 'released' | 'withdrawn' | 'none';

/**
 * `waitingOnly`: only take a waiting run out of its line (a run at work keeps its slot). `gen`: the generation of the
 * job releasing the slot; a slot held for a newer one is left alone (none given: released whatever it is held for).
 */
export async function flowRelease(
  redis: RedisClient,
  k: FlowKeys,
  runId: string,
  waitingOnly = false,
  gen?: SlotGeneration,
): Promise<Released> {
  const res = await script(redis, 'flowRelease')(
    k.waiting,
    k.held,
    k.pending,
    k.counts,
    k.turns,
    runId,
    k.linePrefix,
    waitingOnly ? 'waiting' : 'any',
    gen ? JSON.stringify(gen) : '',
  );
  return res === 1 ? 'released' : res === 2 ? 'withdrawn' : 'none';
}
