/**
 * Typed call of src/store/lua/retryRun-17.lua: retry a stopped run from its last commit, limits and journal in the same
 * change.
 */
import type { RedisClient } from '../connect.js';
import type { RunKeys } from '../keys.js';
import type { CapturedAdd } from '../bullmqInternals.js';
import { ScriptCode, expectReply } from '../codes.js';
import { script } from '../luaScripts.js';
import { InvariantError } from '../../core/errors.js';

export interface RetryRunArgs {
  runId: string;
  /** What the caller read: the script refuses if the run moved on since. */
  expected: { status: string; cursor: number; resumes: number };
  jobId: string;
  now: number;
  eventsMaxLen: number;
  /** The run's limits after the retry (equal to the old ones when there is no extension). */
  limits: { maxSteps: number; maxTokens: number; maxWallMs: number; deadlineAt: number; maxCost?: number | undefined };
  extended: boolean;
  /** The operator journal entry (JSON), the run_retried and status_changed events (JSON). */
  entry: string;
  retriedEvent: string;
  statusEvent: string;
  /** BullMQ's addStandardJob of the retried step's job. */
  job: CapturedAdd;
  /** An ended run's packed journal as read (readPackedJournal): unpacked into the list by the retry. */
  packedJournal: { sha1: string; entries: readonly (string | Buffer)[] };
}

export type RetryRunResult =
  | { outcome: 'retried' }
  | { outcome: 'wrong_status'; status: string }
  | { outcome: 'moved_on' }
  | { outcome: 'budget_exhausted'; budget: 'steps' | 'tokens' | 'wall_clock' | 'cost' }
  /**
   * `compensation`: the action is an original whose compensation is pending (still in the human queue), or
   * `settled`: it was compensated or its effect accepted, and the run does not go on after it.
   */
  | { outcome: 'action_waiting'; actionId: string; compensation?: 'pending' | 'settled' }
  | { outcome: 'superseded'; laterRunId: string }
  /** The run is a child whose parent's wake took its outcome (the child's mark, takeChildOutcome-1.lua). */
  | { outcome: 'parent_moved_on'; parentRunId: string }
  /** The run was erased and its step would act again on the decision the erasure rewrote. */
  | { outcome: 'run_erased' };

/** The script's answer; throws FenceError run_missing (and the typed error of any other code). */
export async function retryRunCall(
  redis: RedisClient,
  k: RunKeys & { subjectLatest: string; humanQueue: string },
  a: RetryRunArgs,
): Promise<RetryRunResult> {
  const res = (await script(redis, 'retryRun')(
    k.run,
    k.budget,
    k.journal,
    k.events,
    k.actions,
    ...a.job.keys,
    k.subjectLatest,
    k.journalPacked,
    k.humanQueue,
    a.expected.status,
    a.expected.cursor,
    a.expected.resumes,
    a.jobId,
    a.now,
    a.eventsMaxLen,
    a.limits.maxSteps,
    a.limits.maxTokens,
    a.limits.maxWallMs,
    a.limits.deadlineAt,
    a.extended ? 1 : 0,
    a.entry,
    a.retriedEvent,
    a.statusEvent,
    ...a.job.argv,
    a.runId,
    a.limits.maxCost ?? 0,
    a.packedJournal.sha1,
    ...a.packedJournal.entries,
  )) as [number, string, string?];
  const [code, detail, why] = res;
  switch (code) {
    case 1:
      return { outcome: 'retried' };
    case ScriptCode.RunNotRunning:
      return { outcome: 'wrong_status', status: detail };
    case ScriptCode.StaleStep:
      return { outcome: 'moved_on' };
    case ScriptCode.BudgetExhausted:
      return { outcome: 'budget_exhausted', budget: detail as 'steps' | 'tokens' | 'wall_clock' | 'cost' };
    case ScriptCode.ActionWaiting:
      return {
        outcome: 'action_waiting',
        actionId: detail,
        ...(why === 'compensation'
          ? { compensation: 'pending' }
          : why === 'compensated'
            ? { compensation: 'settled' }
            : {}),
      };
    case ScriptCode.Superseded:
      return { outcome: 'superseded', laterRunId: detail };
    case ScriptCode.ParentMovedOn:
      return { outcome: 'parent_moved_on', parentRunId: detail };
    case ScriptCode.RunErased:
      return { outcome: 'run_erased' };
    default:
      expectReply(res, { runId: a.runId });
      throw new InvariantError('invariant', `retryRun-17.lua answered ${code}`);
  }
}
