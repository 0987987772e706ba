/**
 * Typed call of src/store/lua/stopRun-5.lua: end a parked run from an expected status (optionally recording a cancel
 * first).
 */
import type { RedisClient } from '../connect.js';
import type { RunKeys } from '../keys.js';
import { expectReply } from '../codes.js';
import { script } from '../luaScripts.js';
import { isRunStatus, type RunStatus } from '../../core/status.js';
import { InvariantError } from '../../core/errors.js';

export interface StopRunArgs {
  runId: string;
  expected: readonly RunStatus[];
  status: RunStatus;
  reason: string;
  now: number;
  eventsMaxLen: number;
  retentionMs: number;
  /** Record cancelRequested (with `reason`) so a running run is cancelled by its next commit. */
  requestCancel: boolean;
}

/** `stopped`, and the run's status afterwards; throws FenceError run_missing. */
export async function stopRunCall(
  redis: RedisClient,
  k: RunKeys,
  a: StopRunArgs,
): Promise<{ stopped: boolean; status: RunStatus }> {
  const res = await script(redis, 'stopRun')(
    k.run,
    k.budget,
    k.journal,
    k.events,
    k.actions,
    a.expected.join(' '),
    a.status,
    a.reason,
    a.now,
    a.eventsMaxLen,
    a.retentionMs,
    a.requestCancel ? 1 : 0,
    a.requestCancel ? a.reason : '',
  );
  const [code, status] = expectReply(res, { runId: a.runId }) as [number, string];
  if (!isRunStatus(status)) throw new InvariantError('invariant', `stopRun answered an unknown status: ${status}`);
  return { stopped: code === 1, status };
}
