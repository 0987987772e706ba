/**
 * POST /v1/runs/:id/cancel `{operator?}`. Records cancelRequested and the
 * cancel's reason (`cancelled_by_operator: requested by <operator>`); a parked
 * run (waiting_approval / needs_human) is cancelled at once, in the same script
 * (src/store/lua/stopRun-5.lua). A running run is cancelled by its next commit,
 * whatever status that commit would have set (commitStep-23.lua), and no
 * dispatch on the model's behalf follows: the ledger's move to `dispatched`
 * refuses atomically once the flag is set (ledgerTransition-6.lua). A parked
 * run's pending approval is withdrawn (a decision on it would be void anyway).
 */
import { Router } from 'express';
import { z } from 'zod';
import type { AppContext } from '../../bin/context.js';
import { FenceError } from '../../core/errors.js';
import { withdrawApprovals } from '../../ledger/approvals.js';
import { requireToken, runNotFound } from '../auth.js';
import { isRunId } from '../../store/keys.js';
import { invalid, param } from './http.js';
import { stopRun } from '../../runs/stop.js';
import { isTerminal } from '../../runs/status.js';

const cancelSchema = z.object({ operator: z.string().min(1).max(200).optional() }).strict();


export function cancelRouter(ctx: AppContext): Router {
  const r = Router();
  r.post('/v1/runs/:id/cancel', requireToken(ctx.cfg.OPERATOR_TOKEN, 'operator'), async (req, res) => {
    const parsed = cancelSchema.safeParse(req.body ?? {});
    if (!parsed.success) return void invalid(res, parsed.error);
    const runId = param(req.params.id);
    if (!isRunId(runId)) return runNotFound(res);
    const reason = `cancelled_by_operator: requested by ${parsed.data.operator ?? 'operator'}`;
    let result;
    try {
      result = await stopRun(ctx, runId, {
        expected: ['waiting_approval', 'needs_human'], status: 'cancelled', reason, now: Date.now(), requestCancel: true,
      });
    } catch (err) {
      if (err instanceof FenceError && err.code === 'run_missing') return runNotFound(res);
      throw err;
    }
    if (!result.stopped && isTerminal(result.status)) return void res.status(409).json({ error: 'run_finished', runId, status: result.status });
    // Cancelled while waiting for approval: nobody is asked to decide for it any more.
    if (result.stopped) await withdrawApprovals(ctx, runId, reason);
    res.status(result.stopped ? 200 : 202).json({ runId, status: result.status, cancelled: result.stopped ? 'now' : 'at_next_commit' });
  });
  return r;
}
