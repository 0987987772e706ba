/**
 * Typed call of src/store/lua/continueVersion-13.lua: re-pin a run parked for a version change and resume it, one
 * atomic change.
 */
import type { RedisClient } from '../connect.js';
import type { CapturedAdd } from '../bullmqInternals.js';
import { expectReply, ScriptCode } from '../codes.js';
import { script } from '../luaScripts.js';

export interface ContinueVersionArgs {
  runId: string;
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
 * Throws FenceError run_missing, AgentError version_mismatch when the run is not parked for a version change or its
 * pin moved, AgentError run_superseded (details.laterRunId) when a later run of its subject superseded it, or
 * AgentError parent_moved_on (details.parentRunId) when it is a child whose parent's wake took its outcome.
 */
export async function continueVersion(
  redis: RedisClient,
  k: { run: string; journal: string; events: string; subjectLatest: string },
  a: ContinueVersionArgs,
): Promise<void> {
  const res = await script(redis, 'continueVersion')(
    k.run,
    k.journal,
    k.events,
    ...a.job.keys,
    k.subjectLatest,
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
    a.runId,
  );
  const later = Array.isArray(res) && res[0] === ScriptCode.Superseded ? String(res[1]) : undefined;
  const parent = Array.isArray(res) && res[0] === ScriptCode.ParentMovedOn ? String(res[1]) : undefined;
  expectReply(res, {
    runKey: k.run,
    ...(later ? { laterRunId: later } : {}),
    ...(parent ? { parentRunId: parent } : {}),
  });
}
