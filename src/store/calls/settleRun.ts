/** Typed call of src/store/lua/settleRun-8.lua: end a run whose current step job died, if it still waits on it. */
import type { RedisClient } from '../connect.js';
import type { RunKeys } from '../keys.js';
import { expectReply } from '../codes.js';
import { script } from '../luaScripts.js';

export interface SettleRunKeys extends RunKeys {
  jobHash: string;
  failedSet: string;
  completedSet: string;
}

export interface SettleRunArgs {
  runId: string;
  jobId: string;
  jobState: 'failed' | 'missing' | 'completed';
  status: 'failed' | 'needs_human';
  reason: string;
  now: number;
  minAgeMs: number;
  eventsMaxLen: number;
  retentionMs: number;
}

/**
 * settled with the job state, or left alone with why (run_moved_on, job_alive, job_<state>, too_young); throws
 * FenceError run_missing.
 */
export async function settleRunCall(
  redis: RedisClient,
  k: SettleRunKeys,
  a: SettleRunArgs,
): Promise<{ settled: boolean; why: string }> {
  const res = await script(redis, 'settleRun')(
    k.run,
    k.budget,
    k.journal,
    k.events,
    k.actions,
    k.jobHash,
    k.failedSet,
    k.completedSet,
    a.jobId,
    a.jobState,
    a.status,
    a.reason,
    a.now,
    a.minAgeMs,
    a.eventsMaxLen,
    a.retentionMs,
  );
  const [code, why] = expectReply(res, { runId: a.runId }) as [number, string];
  return { settled: code === 1, why };
}
