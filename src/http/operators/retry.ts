/**
 * POST /v1/runs/:id/retry {steps?, tokens?, wallMs?, cost?}: a `failed`, `budget_exceeded`
 * or `needs_human` run continues from its last commit, optionally with more steps,
 * tokens, wall clock or money (µ$, raising the run's maxCost) (src/runs/retryRun.ts, one script: src/store/lua/retryRun-17.lua).
 * Recorded in the run's journal as an `operator` entry (action `retry`, by the
 * authenticated operator, the extension as its detail). A malformed body is 400
 * naming the field and writes nothing.
 */
import { Router } from 'express';
import { z } from 'zod';
import type { EngineContext } from '../../runs/engineContext.js';
import { HARD_LIMITS } from '../../core/limits.js';
import { operatorOf, requireOperator } from '../auth.js';
import { retryStoppedRun } from '../../operations/retry.js';
import { answerOf } from './answers.js';
import { invalid, param } from '../../producer/fieldErrors.js';

/** Each extension is bounded by src/core/limits.ts; the run's totals by LIMIT_MAX_* (checked by retryRun). */
export const retryBodySchema = z
  .object({
    steps: z.number().int().nonnegative().max(HARD_LIMITS.maxSteps).optional(),
    tokens: z.number().int().nonnegative().max(HARD_LIMITS.maxTokens).optional(),
    wallMs: z.number().int().nonnegative().max(HARD_LIMITS.maxWallMs).optional(),
    cost: z
      .number()
      .int()
      .nonnegative()
      .max(HARD_LIMITS.maxCost)
      .optional()
      .meta({ description: "More money in µ$ (1e-6 USD): the run's maxCost grows by it (400 when it has none)." }),
  })
  .strict();

export function retryRouter(ctx: EngineContext): Router {
  const r = Router();
  r.post('/v1/runs/:id/retry', requireOperator(ctx, 'operator'), async (req, res) => {
    const parsed = retryBodySchema.safeParse(req.body ?? {});
    if (!parsed.success) return void invalid(res, parsed.error);
    const answer = answerOf(await retryStoppedRun(ctx, operatorOf(res), param(req.params.id), parsed.data));
    res.status(answer.status).json(answer.body);
  });
  return r;
}
