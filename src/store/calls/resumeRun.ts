/** Typed call of src/store/lua/resumeRun-11.lua: resume a parked run at its cursor with a new job. */
import type { RedisClient } from '../connect.js';
import type { CapturedAdd } from '../bullmqInternals.js';
import { replyCode } from '../codes.js';
import { script } from '../luaScripts.js';

export interface ResumeRunArgs {
  expectedStatus: string;
  jobId: string;
  now: number;
  eventsMaxLen: number;
  /** The `status_changed` event (JSON). */
  event: string;
  /** BullMQ's addStandardJob of the resumed step's job. */
  job: CapturedAdd;
}

/** true: resumed; false: the run is missing or not in the expected status (a second click changes nothing). */
export async function resumeRun(
  redis: RedisClient,
  k: { run: string; events: string },
  a: ResumeRunArgs,
): Promise<boolean> {
  const res = await script(redis, 'resumeRun')(
    k.run,
    k.events,
    ...a.job.keys,
    a.expectedStatus,
    a.jobId,
    a.now,
    a.eventsMaxLen,
    a.event,
    ...a.job.argv,
  );
  return replyCode(res) === undefined && res === 1;
}
