/** Typed call of src/store/lua/resumeRun-12.lua: resume a parked run at its cursor with a new job. */
import type { RedisClient } from '../connect.js';
import type { CapturedAdd } from '../bullmqInternals.js';
import { expectReply, ScriptCode } from '../codes.js';
import { script } from '../luaScripts.js';

export interface ResumeRunArgs {
  runId: string;
  expectedStatus: string;
  jobId: string;
  now: number;
  eventsMaxLen: number;
  /** The `status_changed` event (JSON). */
  event: string;
  /** BullMQ's addStandardJob of the resumed step's job. */
  job: CapturedAdd;
}

/**
 * Resumed; or not: the run's status (`missing`; not the expected one: a second click changes nothing), the
 * later run of its subject that superseded it (`laterRunId`: only the subject's latest run comes back to work), or,
 * for a child run, the parent that took its outcome and moved on (`parentRunId`: found by RunStore.resume before
 * this script, src/runs/children.ts parentMovedOn, or by the script from the child's own mark), or the field at
 * which the run's stored spec no longer parses (`unreadableSpec`, also found before the script: no step could run
 * the run).
 */
export type ResumeResult =
  | { resumed: true }
  | { resumed: false; status: string }
  | { resumed: false; status: string; laterRunId: string }
  | { resumed: false; status: string; parentRunId: string; parentStatus: string }
  | { resumed: false; status: string; unreadableSpec: string };

/**
 * The script's answer: a ResumeResult, or the parent whose wake took the run's outcome (`outcomeTakenBy`: the run is
 * a child marked by takeChildOutcome-1.lua), which RunStore.resume answers with the parent's status.
 */
export type ResumeReply = ResumeResult | { resumed: false; status: string; outcomeTakenBy: string };

export async function resumeRun(
  redis: RedisClient,
  k: { run: string; events: string; subjectLatest: string },
  a: ResumeRunArgs,
): Promise<ResumeReply> {
  const res = (await script(redis, 'resumeRun')(
    k.run,
    k.events,
    ...a.job.keys,
    k.subjectLatest,
    a.expectedStatus,
    a.jobId,
    a.now,
    a.eventsMaxLen,
    a.event,
    ...a.job.argv,
    a.runId,
  )) as [number, string];
  const [code, detail] = res;
  switch (code) {
    case 1:
      return { resumed: true };
    case ScriptCode.RunMissing:
      return { resumed: false, status: 'missing' };
    case ScriptCode.RunNotRunning:
      return { resumed: false, status: detail };
    case ScriptCode.Superseded:
      return { resumed: false, status: a.expectedStatus, laterRunId: detail };
    case ScriptCode.ParentMovedOn:
      return { resumed: false, status: a.expectedStatus, outcomeTakenBy: detail };
    default:
      expectReply(res, { runKey: k.run });
      return { resumed: false, status: 'unknown' };
  }
}
