/**
 * POST /v1/runs/:id/cancel. Records cancelRequested; a parked run
 * (waiting_approval / needs_human) is cancelled at once, in the same script
 * (src/lua/stopRun-5.lua). A running run is cancelled by its next commit
 * (commitStep-21.lua), and the runner dispatches nothing once the flag is set.
 */
import { Router } from 'express';
import type { AppContext } from '../app/context.js';
import { FenceError } from '../errors.js';
import { requireToken, runNotFound } from '../producer/auth.js';
import { isRunId } from '../redis/keys.js';
import { param } from './http.js';
import { stopRun } from './stopRun.js';

const TERMINAL = new Set(['completed', 'failed', 'budget_exceeded', 'cancelled']);

export function cancelRouter(ctx: AppContext): Router {
  const r = Router();
  r.post('/v1/runs/:id/cancel', requireToken(ctx.cfg.OPERATOR_TOKEN, 'operator'), async (req, res) => {
    const runId = param(req.params.id);
    if (!isRunId(runId)) return runNotFound(res);
    let result;
    try {
      result = await stopRun(ctx, runId, {
        expected: ['waiting_approval', 'needs_human'], status: 'cancelled', reason: 'cancelled_by_operator', now: Date.now(), requestCancel: true,
      });
    } catch (err) {
      if (err instanceof FenceError && err.code === 'run_missing') return runNotFound(res);
      throw err;
    }
    if (!result.stopped && TERMINAL.has(result.status)) return void res.status(409).json({ error: 'run_finished', runId, status: result.status });
    res.status(result.stopped ? 200 : 202).json({ runId, status: result.status, cancelled: result.stopped ? 'now' : 'at_next_commit' });
  });
  return r;
}
