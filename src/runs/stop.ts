/** Ends a parked run from outside its step (operator cancel, approval expiry): src/store/lua/stopRun-5.lua. */
import type { EngineContext } from './engineContext.js';
import { countRunFinished } from '../metrics/metrics.js';
import { stopRunCall } from '../store/calls/stopRun.js';

export interface StopRequest {
  /** Statuses the run may be ended from; any other status is left alone. */
  expected: string[];
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
): Promise<{ stopped: boolean; status: string }> {
  const k = ctx.keys.run(runId);
  const r = await stopRunCall(ctx.redis, k, {
    runId,
    expected: req.expected,
    status: req.status,
    reason: req.reason,
    now: req.now,
    eventsMaxLen: ctx.cfg.EVENTS_MAX_LEN,
    retentionMs: ctx.cfg.RUN_RETENTION_MS,
    requestCancel: req.requestCancel === true,
  });
  if (r.stopped) countRunFinished(ctx.metrics, req.status, req.reason);
  return r;
}
