/**
 * Typed call of src/store/lua/continueVersion-12.lua: re-pin a run parked for a version change and resume it, one
 * atomic change.
 */
import type { RedisClient } from '../connect.js';
import type { CapturedAdd } from '../bullmqInternals.js';
import { expectReply } from '../codes.js';
import { script } from '../luaScripts.js';

export interface ContinueVersionArgs {
  /** The pinned version and tools hash the operator saw (the change is refused if they moved). */
  fromVersion: string;
  fromToolsHash: string;
  /** The re-pinned spec (JSON) and its version and tools hash. */
  spec: string;
  toVersion: string;
  toToolsHash: string;
  jobId: string;
  now: number;
  eventsMaxLen: number;
  /** The operator journal entry (JSON), also the operator_action event. */
  entry: string;
  /** The status_changed event (JSON). */
  event: string;
  /** BullMQ's addStandardJob of the resumed step's job. */
  job: CapturedAdd;
}

/**
 * Throws FenceError run_missing, or AgentError version_mismatch when the run is not parked for a version change or its
 * pin moved.
 */
export async function continueVersion(
  redis: RedisClient,
  k: { run: string; journal: string; events: string },
  a: ContinueVersionArgs,
): Promise<void> {
  const res = await script(redis, 'continueVersion')(
    k.run,
    k.journal,
    k.events,
    ...a.job.keys,
    a.fromVersion,
    a.fromToolsHash,
    a.spec,
    a.toVersion,
    a.toToolsHash,
    a.jobId,
    a.now,
    a.eventsMaxLen,
    a.entry,
    a.event,
    ...a.job.argv,
  );
  expectReply(res, { runKey: k.run });
}
