/**
 * Schedules over HTTP (src/producer/schedules.ts):
 *   PUT    /v1/schedules/:id                          a producer or the tenant's token (body names the tenant)
 *   GET    /v1/schedules?tenant=                      operators (a tenant-scoped operator sees its tenants)
 *   POST   /v1/schedules/:tenant/:id/pause | resume   operators with the operator role
 *   DELETE /v1/schedules/:tenant/:id                  operators with the operator role
 * A 4xx names the field and writes nothing.
 */
import { Router, type Response } from 'express';
import type { EngineContext } from '../../runs/engineContext.js';
import { operatorOf, requireOperator, requireRunCreation } from '../auth.js';
import { seesTenant } from '../operatorIdentity.js';
import { invalid, param } from '../../producer/fieldErrors.js';
import { InvalidRunRequest } from '../../producer/intake.js';
import { isScheduleId, scheduleBodySchema, type Schedules } from '../../producer/schedules.js';

const badId = (res: Response) =>
  void res
    .status(400)
    .json({ error: 'invalid_request', fields: [{ path: 'id', message: '1-64 letters, digits, _ . or -' }] });
const notFound = (res: Response) => void res.status(404).json({ error: 'not_found', message: 'no such schedule' });

export function schedulesRouter(ctx: EngineContext, schedules: Schedules): Router {
  const r = Router();
  r.put('/v1/schedules/:id', requireRunCreation(ctx.cfg), async (req, res) => {
    const id = param(req.params.id);
    if (!isScheduleId(id)) return badId(res);
    const parsed = scheduleBodySchema.safeParse(req.body);
    if (!parsed.success) return void invalid(res, parsed.error);
    try {
      res.json(await schedules.put(id, parsed.data));
    } catch (err) {
      if (!(err instanceof InvalidRunRequest)) throw err;
      res.status(400).json({ error: 'invalid_request', fields: err.fields });
    }
  });
  r.get('/v1/schedules', requireOperator(ctx.cfg, 'viewer'), async (req, res) => {
    const op = operatorOf(res);
    const tenant = typeof req.query.tenant === 'string' ? req.query.tenant : undefined;
    const all = await schedules.list(tenant);
    res.json({ schedules: all.filter((s) => seesTenant(op, s.tenant)) });
  });
  for (const action of ['pause', 'resume'] as const) {
    r.post(`/v1/schedules/:tenant/:id/${action}`, requireOperator(ctx.cfg, 'operator'), async (req, res) => {
      const tenant = param(req.params.tenant);
      if (!seesTenant(operatorOf(res), tenant)) return notFound(res);
      const s = await schedules.setPaused(tenant, param(req.params.id), action === 'pause');
      if (!s) return notFound(res);
      ctx.log.info(
        { code: `schedule_${action}d`, tenant, schedule: s.id, operator: operatorOf(res).name },
        `schedule ${action}d`,
      );
      res.json(s);
    });
  }
  r.delete('/v1/schedules/:tenant/:id', requireOperator(ctx.cfg, 'operator'), async (req, res) => {
    const tenant = param(req.params.tenant);
    if (!seesTenant(operatorOf(res), tenant)) return notFound(res);
    if (!(await schedules.remove(tenant, param(req.params.id)))) return notFound(res);
    res.status(204).end();
  });
  return r;
}
