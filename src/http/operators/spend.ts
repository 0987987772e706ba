/**
 * Spend for operators: GET /v1/spend?period=YYYY-MM-DD|YYYY-MM (default today, UTC): the real cost of every model
 * attempt of the day or month by tenant, agent and model, in µ$ (src/budget/spend.ts). A tenant-scoped operator
 * sees its own tenants' lines only. A malformed period is 400 naming `period`.
 */
import { Router } from 'express';
import { z } from 'zod';
import type { EngineContext } from '../../runs/engineContext.js';
import { operatorOf, requireOperator } from '../auth.js';
import { invalid } from '../../producer/fieldErrors.js';
import { readSpendReport } from '../../budget/spend.js';

export const spendQuerySchema = z.object({
  period: z
    .string()
    .regex(/^\d{4}-\d{2}(-\d{2})?$/, 'a UTC day YYYY-MM-DD or month YYYY-MM')
    .optional(),
});

export function spendRouter(ctx: EngineContext): Router {
  const r = Router();
  r.get('/v1/spend', requireOperator(ctx.cfg, 'viewer'), async (req, res) => {
    const q = spendQuerySchema.safeParse(req.query);
    if (!q.success) return void invalid(res, q.error);
    const period = q.data.period ?? new Date().toISOString().slice(0, 10);
    const report = await readSpendReport(ctx.redis, ctx.keys, period);
    const op = operatorOf(res);
    if (op.tenants === '*') return res.json(report);
    const mine = new Set(op.tenants);
    const lines = report.lines.filter((l) => mine.has(l.tenant));
    return res.json({ ...report, lines, totalMicros: lines.reduce((n, l) => n + l.micros, 0) });
  });
  return r;
}
