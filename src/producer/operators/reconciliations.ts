/**
 * Operator routes of the human reconciliation queue: actions in needs_human
 * (outcome unknown and not decidable by the service) with their evidence, and
 * the operator's finding.
 *
 * confirmed -> needs_human->confirmed with the receipt; the resumed step reads it, nothing is resent.
 * not_sent  -> needs_human->safe_retry; the resumed step dispatches once more with the SAME key.
 * compensate -> a compensating action (a clarification email to the customer) planned, linked
 *               both ways, and executed through the ledger; the original moves
 *               needs_human->compensation_required; once the compensation is confirmed the
 *               run ends `failed` / `compensated: ...` (see compensation.ts). Repeating the
 *               request finishes a compensation left unsettled and never sends a second one.
 * A finding on a compensation itself (it reached needs_human) finishes it and ends the run.
 *
 * If the process dies between the move and the resume, the run stays
 * needs_human with a settled action; the reconciler or a second POST (409,
 * with the state) shows it, and resuming is safe to repeat.
 */
import { Router } from 'express';
import { z } from 'zod';
import type { AppContext } from '../../bin/context.js';
import { Ledger, LedgerConflict } from '../../ledger/ledger.js';
import { actionNotFound, requireToken } from '../auth.js';
import { isActionId } from '../../store/keys.js';
import { invalid, param } from './http.js';
import { createEffectRunner } from '../../ledger/runner.js';
import { CrashPoints } from '../../config/testHooks.js';
import { Compensations, CompensationRefused } from '../../ledger/compensation.js';
import { resumeParked } from '../../runs/resume.js';

const findingSchema = z.object({
  finding: z.enum(['confirmed', 'not_sent', 'compensate']),
  receipt: z.string().min(1).max(200).optional(),
  evidence: z.unknown(),
  operator: z.string().min(1).max(200),
}).strict().refine((b) => b.finding !== 'confirmed' || b.receipt !== undefined, { path: ['receipt'], message: 'a confirmed finding needs the receipt' });

export function reconciliationsRouter(ctx: AppContext, ledger: Ledger): Router {
  const r = Router();
  const operator = requireToken(ctx.cfg.OPERATOR_TOKEN, 'operator');
  const compensations = new Compensations(ctx, ledger, createEffectRunner(ctx, { workerId: `operator-api:${process.pid}`, crash: new CrashPoints([]) }));

  r.get('/v1/reconciliations', operator, async (_req, res) => {
    const items = [];
    for (const shard of ctx.keys.allShards()) {
      for (const { actionId, since } of await ledger.indexed(ctx.keys.humanQueue(shard), Number.POSITIVE_INFINITY, 1000)) {
        const rec = await ledger.getInShard(shard, actionId);
        if (!rec) continue;
        items.push({ ...rec, since, history: await ledger.history(rec.runId, actionId) });
      }
    }
    res.json({ reconciliations: items });
  });

  r.post('/v1/reconciliations/:actionId', operator, async (req, res) => {
    const parsed = findingSchema.safeParse(req.body);
    if (!parsed.success) return void invalid(res, parsed.error);
    const { finding, receipt, evidence, operator: by } = parsed.data;
    const actionId = param(req.params.actionId);
    if (!isActionId(actionId)) return actionNotFound(res);
    const rec = await ledger.locate(actionId);
    if (!rec) return actionNotFound(res);
    const ev = { by, why: `operator finding: ${finding}`, evidence: { finding, evidence, ...(receipt ? { receipt } : {}) } };
    try {
      if (finding === 'compensate') {
        const result = await compensations.compensate(rec, by, ev.evidence);
        const after = await ledger.get(rec.runId, actionId);
        return void res.status(result.inProgress ? 202 : 200).json({
          actionId, runId: rec.runId, state: after?.state, resumed: false,
          compensation: result.compensation.actionId, compensationState: result.compensation.state,
          ...(result.compensation.receipt ? { compensationReceipt: result.compensation.receipt } : {}),
          inProgress: result.inProgress, run: result.run,
        });
      }
      if (finding === 'confirmed') {
        const output = JSON.stringify({ receipt, confirmedBy: 'operator' });
        await ledger.transition(rec.runId, actionId, 'needs_human', 'confirmed', ev, { receipt: receipt!, output, outcome: 'confirmed_by_operator' });
      } else {
        await ledger.transition(rec.runId, actionId, 'needs_human', 'safe_retry', ev);
      }
    } catch (err) {
      if (err instanceof LedgerConflict) return void res.status(409).json({ error: 'not_in_human_queue', actionId, state: err.actual });
      if (err instanceof CompensationRefused) return void res.status(409).json({ error: err.code, actionId, message: err.message });
      throw err;
    }
    if (rec.compensates) {
      // A compensation resolved by a person: finish it (a safe_retry is sent once more with its key) and end the run; never resume the agent.
      const result = await compensations.drive((await ledger.get(rec.runId, actionId))!, await compensations.requireSpec(rec.runId), by);
      return void res.json({ actionId, runId: rec.runId, state: result.compensation.state, resumed: false, compensates: rec.compensates, run: result.run });
    }
    const resumed = await resumeParked(ctx, rec.runId, 'needs_human');
    const after = await ledger.get(rec.runId, actionId);
    res.json({ actionId, runId: rec.runId, state: after?.state, resumed });
  });
  return r;
}
