/**
 * Typed call of src/store/lua/createRun-14.lua: a run and its first step job in one atomic change, linked to its
 * subject's latest run.
 */
import type { RedisClient } from '../connect.js';
import type { CapturedAdd } from '../bullmqInternals.js';
import { InvariantError } from '../../core/errors.js';
import { script } from '../luaScripts.js';

export interface CreateRunKeys {
  run: string;
  budget: string;
  events: string;
  /** The shard's run index. */
  runIndex: string;
  /** The subject's latest-run record (KeySpace.subjectLatest): on the run's shard. */
  subjectLatest: string;
}

/**
 * How the intake names its run: `event` = one run per event, linked to the subject's latest
 * run; `subject` = no event named, the subject's latest run is the run when it has one.
 */
export type IntakeMode = 'event' | 'subject';

export interface CreateRunArgs {
  runId: string;
  now: number;
  /** Run hash fields, all strings (Lua's cjson would turn numbers into doubles); `spec` is the spec's JSON. */
  run: Record<string, string>;
  budget: Record<string, string>;
  /** The `created` event (JSON). */
  event: string;
  eventsMaxLen: number;
  mode: IntakeMode;
  /** How long the subject's latest-run record lives after its last run was created (ms). */
  subjectTtlMs: number;
  /** BullMQ's addStandardJob of step 1's job (captureAddStandardJob). */
  firstJob: CapturedAdd;
  /** Step 1's job id. */
  firstJobId: string;
  /**
   * Flow control: step 1's job waits in the delayed set until this ms unless admitted before (src/flow/admission.ts),
   * moved there in the same change that creates it. Unset: the job goes to the queue.
   */
  deferUntil?: number;
}

export type CreateRunResult =
  | { outcome: 'created'; runId: string; previousRunId?: string }
  /** The same event again: the run exists, nothing written. */
  | { outcome: 'exists'; runId: string }
  /** No event named and the subject has a latest run: that run, nothing written. */
  | { outcome: 'joined'; runId: string };

export async function createRun(redis: RedisClient, k: CreateRunKeys, a: CreateRunArgs): Promise<CreateRunResult> {
  return createRunResult(a, await script(redis, 'createRun')(...createRunArgs(k, a)));
}

/** The script's KEYS then ARGV. */
export function createRunArgs(k: CreateRunKeys, a: CreateRunArgs): (string | number | Buffer)[] {
  return [
    k.run,
    k.budget,
    k.events,
    k.runIndex,
    k.subjectLatest,
    ...a.firstJob.keys,
    a.runId,
    a.now,
    JSON.stringify(a.run),
    JSON.stringify(a.budget),
    a.event,
    a.eventsMaxLen,
    a.mode,
    a.subjectTtlMs,
    ...a.firstJob.argv,
    a.deferUntil ?? '',
    a.firstJobId,
  ];
}

export function createRunResult(a: CreateRunArgs, res: unknown): CreateRunResult {
  const [code, id] = Array.isArray(res) ? (res as [unknown, unknown]) : [res, undefined];
  const runId = typeof id === 'string' ? id : '';
  if (code === 1) return { outcome: 'created', runId: a.runId, ...(runId !== '' ? { previousRunId: runId } : {}) };
  if (code === 0) return { outcome: 'exists', runId: a.runId };
  if (code === 2 && runId !== '') return { outcome: 'joined', runId };
  throw new InvariantError('script_failed', `createRun returned ${JSON.stringify(res)}`);
}
