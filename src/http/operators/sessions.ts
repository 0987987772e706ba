/**
 * POST /v1/operators/:name/sessions/end: ends every console session of one operator at once (on every API
 * process: the sessions carry an epoch, and this bumps the operator's). For an operator whose access is being
 * taken away before the directory change reaches every process, or whose browser was lost. Only an operator (the
 * role) who sees every tenant may end someone's sessions; anyone signed in, a viewer too, may end their own.
 */
import { Router } from 'express';
import { z } from 'zod';
import type { EngineContext } from '../../runs/engineContext.js';
import { operatorOf, requireOperator } from '../auth.js';
import type { ConsoleSessions } from '../console/session.js';
import { invalid, param } from '../../producer/fieldErrors.js';

export const nameSchema = z.object({ name: z.string().min(1).max(200) });

export function sessionsRouter(ctx: EngineContext, sessions: ConsoleSessions): Router {
  const r = Router();
  // A viewer passes here: ending its own sessions takes nothing from anyone; someone else's is checked below.
  r.post('/v1/operators/:name/sessions/end', requireOperator(ctx, 'viewer'), async (req, res) => {
    const parsed = nameSchema.safeParse({ name: param(req.params.name) });
    if (!parsed.success) return void invalid(res, parsed.error);
    const by = operatorOf(res);
    if (by.name !== parsed.data.name && (by.role !== 'operator' || by.tenants !== '*')) {
      return void res
        .status(403)
        .json({ error: 'forbidden', message: `operator ${by.name} may end only its own sessions` });
    }
    await sessions.endAll(parsed.data.name);
    ctx.log.info({ code: 'console_sessions_ended', operator: parsed.data.name, by: by.name }, 'console sessions ended');
    res.status(200).json({ operator: parsed.data.name, sessionsEnded: true });
  });
  return r;
}
