/** Ends a parked run from outside its step (operator cancel, approval expiry): src/store/lua/stopRun-5.lua. */
import type { EngineContext } from './engineContext.js';
import { countRunFinished } from '../metrics/metrics.js';
import { stopRunCall } from '../store/calls/stopRun.js';
import { readRun } from '../store/runRecord.js';
import { promoteIfDelayed } from '../store/queues.js';
import type { RunStatus } from '../core/status.js';
import { retentionAtEnd } from '../store/archiveQueue.js';

export interface StopRequest {
  /** Statuses the run may be ended from; any other status is left alone. */
  expected: RunStatus[];
  status: 'failed' | 'cancelled';
  reason: string;
  now: number;
  /**
   * Also set cancelRequested, with `reason` as the cancel's reason (a running run is then cancelled at its next
   * commit).
   */
  requestCancel?: boolean;
}

/** Returns whether the run was ended, and its status afterwards. Throws FenceError run_missing. */
export async function stopRun(
  ctx: EngineContext,
  runId: string,
  req: StopRequest,
): Promise<{ stopped: boolean; status: RunStatus }> {
  const k = ctx.keys.run(runId);
  const r = await stopRunCall(ctx.redis, k, {
    runId,
    expected: req.expected,
    status: req.status,
    reason: req.reason,
    now: req.now,
    eventsMaxLen: ctx.cfg.EVENTS_MAX_LEN,
    retentionMs: retentionAtEnd(ctx.cfg),
    requestCancel: req.requestCancel === true,
  });
  if (r.stopped) countRunFinished(ctx.metrics, req.status, req.reason);
  return r;
}

/**
 * A run at work whose step job waits in the delayed set (a provider outage's Retry-After, a follow-up's or a rate
 * limit's wait, a version hand-back) meets its recorded cancel now rather than when the wait ends: the job is
 * promoted, and its step ends the run `cancelled` before any model call (src/worker/step/cancel.ts). Returns
 * whether a job was promoted; a job that left the delayed set meanwhile is already on its way to the same check.
 */
export async function wakeForCancel(ctx: EngineContext, runId: string): Promise<boolean> {
  const jobId = (await readRun(ctx.redis, ctx.keys, runId, ['jobId']))?.jobId;
  if (!jobId) return false;
  const job = await ctx.queues.forRun(runId).getJob(jobId);
  // A store error is the cancel's own (its caller answers it; a cancel asked again wakes the job then).
  return job ? promoteIfDelayed(job) : false;
}
