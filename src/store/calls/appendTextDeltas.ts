/** Typed call of src/store/lua/appendTextDeltas-3.lua: one batch of streamed model text, fenced like the commit. */
import type { RedisClient } from '../connect.js';
import { expectReply } from '../codes.js';
import { script } from '../luaScripts.js';

export interface AppendTextDeltasKeys {
  run: string;
  events: string;
  jobLock: string;
}

export interface AppendTextDeltasArgs {
  token: string;
  step: number;
  jobId: string;
  /**
   * `<job instance>-<job attempt>.<model attempt>`: which job, delivery and attempt wrote the text (a job
   * made again for the same step, e.g. by a resume, is another instance). Events show the part after '-'.
   */
  deliveryKey: string;
  eventsMaxLen: number;
  /** The text_delta event (JSON). */
  event: string;
  /** This delivery's step_started event (JSON), '' once emitted. */
  startedEvent: string;
}

/**
 * Returns whether a step_restarted event went first (another delivery had streamed this step);
 * throws the FenceError of a refusal (lock lost, stale step, run missing/not running, decision exists).
 */
export async function appendTextDeltas(
  redis: RedisClient,
  k: AppendTextDeltasKeys,
  a: AppendTextDeltasArgs,
): Promise<{ restarted: boolean }> {
  const res = await script(redis, 'appendTextDeltas')(
    k.run,
    k.events,
    k.jobLock,
    a.token,
    a.step,
    a.jobId,
    a.deliveryKey,
    a.eventsMaxLen,
    a.event,
    a.startedEvent,
  );
  return { restarted: Number(expectReply(res, { step: a.step })) === 0 };
}
