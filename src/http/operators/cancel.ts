/**
 * POST /v1/runs/:id/cancel. Records cancelRequested and the cancel's reason
 * (`cancelled_by_operator: requested by <the authenticated operator>`; a typed
 * `operator` field is accepted from older clients and ignored); a parked
 * run (waiting_approval / needs_human) is cancelled at once, in the same script
 * (src/store/lua/stopRun-5.lua). A running run is cancelled by its next commit,
 * whatever status that commit would have set (commitStep-23.lua), and no
 * dispatch on the model's behalf follows: the ledger's move to `dispatched`
 * refuses atomically once the flag is set (ledgerTransition-6.lua). A parked
 * run's pending approval is withdrawn (a decision on it would be void anyway).
 */
import { Router } from 'express';
import { z } from 'zod';
import type { EngineContext } from '../../runs/engineContext.js';
import { operatorOf, requireOperator } from '../auth.js';
import { cancelRun } from '../../operations/cancel.js';
import { answerOf } from './answers.js';
import { invalid, param } from '../../producer/fieldErrors.js';

export const cancelSchema = z.object({ operator: z.string().min(1).max(200).optional() }).strict();

export function cancelRouter(ctx: EngineContext): Router {
  const r = Router();
  r.post('/v1/runs/:id/cancel', requireOperator(ctx, 'operator'), async (req, res) => {
    const parsed = cancelSchema.safeParse(req.body ?? {});
    if (!parsed.success) return void invalid(res, parsed.error);
    const answer = answerOf(await cancelRun(ctx, operatorOf(res), param(req.params.id)));
    res.status(answer.status).json(answer.body);
  });
  return r;
}
