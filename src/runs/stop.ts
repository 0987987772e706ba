/** Ends a parked run from outside its step (operator cancel, approval expiry): src/store/lua/stopRun-5.lua. */
import type { EngineContext } from '../runs/context.js';
import { countRunFinished } from '../metrics/metrics.js';
import { scriptError } from '../store/codes.js';
import { script } from '../store/scripts.js';

export interface StopRequest {
  /** Statuses the run may be ended from; any other status is left alone. */
  expected: string[];
  status: 'failed' | 'cancelled';
  reason: string;
  now: number;
  /** Also set cancelRequested, with `reason` as the cancel's reason (a running run is then cancelled at its next commit). */
  requestCancel?: boolean;
}

/** Returns whether the run was ended, and its status afterwards. Throws FenceError run_missing. */
export async function stopRun(ctx: EngineContext, runId: string, req: StopRequest): Promise<{ stopped: boolean; status: string }> {
  const k = ctx.keys.run(runId);
  const [code, status] = (await script(ctx.redis, 'stopRun')(
    k.run, k.budget, k.journal, k.events, k.actions,
    req.expected.join(' '), req.status, req.reason, req.now, ctx.cfg.EVENTS_MAX_LEN, ctx.cfg.RUN_RETENTION_MS, req.requestCancel ? 1 : 0, req.requestCancel ? req.reason : '',
  )) as [number, string];
  if (code < 0) throw scriptError(code, { runId });
  if (code === 1) countRunFinished(ctx.metrics, req.status, req.reason);
  return { stopped: code === 1, status };
}
