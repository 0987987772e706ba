/**
 * Schedules over HTTP (src/producer/schedules.ts):
 *   PUT    /v1/schedules/:id                          the producer, or a tenant's token for its own tenant (the body
 *                                                     names the tenant); the schedule fires on that credential
 *   GET    /v1/schedules?tenant=                      any run credential, each seeing what it may: a tenant token its
 *                                                     own schedules, an operator its tenants', the producer all
 *   POST   /v1/schedules/:tenant/:id/pause | resume   the producer, the tenant's own token, or an operator (role
 *   DELETE /v1/schedules/:tenant/:id                  operator) of that tenant
 * Another tenant's schedule answers 404, exactly as an unknown one (as for runs). A 4xx names the field and
 * writes nothing.
 */
import { Router, type NextFunction, type Request, type Response } from 'express';
import type { EngineContext } from '../../runs/engineContext.js';
import {
  authUnconfigured,
  bearer,
  principalFor,
  principalOf,
  principalSees,
  requireRunCreation,
  RUN_TOKEN_SETTINGS,
  runTokensConfigured,
  seesDeployment,
  type Principal,
} from '../auth.js';
import { invalid, param, singleQuery } from '../../producer/fieldErrors.js';
import { InvalidRunRequest } from '../../producer/intake.js';
import {
  isScheduleId,
  scheduleBodySchema,
  ScheduleLimitReached,
  scheduleView,
  type Schedules,
} from '../../producer/schedules.js';
import type { ScheduleActor } from '../../producer/scheduleOwner.js';

const badId = (res: Response) =>
  void res
    .status(400)
    .json({ error: 'invalid_request', fields: [{ path: 'id', message: '1-64 letters, digits, _ . or -' }] });
const notFound = (res: Response) => void res.status(404).json({ error: 'not_found', message: 'no such schedule' });

/** Any run credential; `act`: an operator must have the operator role. The principal is left in res.locals. */
function requireSchedulePrincipal(ctx: EngineContext, act: boolean) {
  return async (req: Request, res: Response, next: NextFunction) => {
    if (!runTokensConfigured(ctx)) return void authUnconfigured(res, RUN_TOKEN_SETTINGS);
    const p = await principalFor(ctx, req);
    if (!p)
      return void res
        .status(401)
        .json({ error: 'unauthorized', message: 'an operator, producer or tenant token is required' });
    if (act && p.role === 'operator' && p.operator.role !== 'operator')
      return void res
        .status(403)
        .json({ error: 'forbidden', message: `operator ${p.operator.name} has the viewer role: it may look, not act` });
    res.locals.principal = p;
    next();
  };
}

const principalOfRes = (res: Response) => res.locals.principal as Principal;

/** Who acts, as a schedule records it: a tenant's token, else the producer (operators make no schedules). */
function actorOf(p: Principal | undefined, token: string | undefined): ScheduleActor {
  return p?.role === 'tenant' && token !== undefined ? { kind: 'tenant', token } : { kind: 'producer' };
}

/** Who `p` names in logs: a role, and an operator's name (never a token). */
const whoActs = (p: Principal) => (p.role === 'operator' ? { operator: p.operator.name } : { by: p.role });

export function schedulesRouter(ctx: EngineContext, schedules: Schedules): Router {
  const r = Router();
  r.put('/v1/schedules/:id', requireRunCreation(ctx.cfg), async (req, res) => {
    const id = param(req.params.id);
    if (!isScheduleId(id)) return void badId(res);
    const parsed = scheduleBodySchema.safeParse(req.body);
    if (!parsed.success) return void invalid(res, parsed.error);
    const token = bearer(req);
    try {
      res.json(scheduleView(await schedules.put(id, parsed.data, actorOf(principalOf(ctx.cfg, token), token))));
    } catch (err) {
      const configured = seesDeployment(ctx.cfg, token);
      if (err instanceof ScheduleLimitReached) {
        const message = err.messageFor(configured);
        return void res.status(409).json({ error: err.code, message, fields: [{ path: 'tenant', message }] });
      }
      if (!(err instanceof InvalidRunRequest)) throw err;
      res.status(400).json({ error: 'invalid_request', fields: err.fieldsFor(configured) });
    }
  });
  r.get('/v1/schedules', requireSchedulePrincipal(ctx, false), async (req, res) => {
    const p = principalOfRes(res);
    const tenant = singleQuery(req, res, 'tenant');
    if (tenant === null) return;
    res.json({
      schedules: await schedules.list((t) => (tenant === undefined || t === tenant) && principalSees(p, t)),
    });
  });
  for (const action of ['pause', 'resume'] as const) {
    r.post(`/v1/schedules/:tenant/:id/${action}`, requireSchedulePrincipal(ctx, true), async (req, res) => {
      const p = principalOfRes(res);
      const tenant = param(req.params.tenant);
      if (!principalSees(p, tenant)) return void notFound(res);
      // A tenant that resumes its schedule makes it fire on its token as configured now.
      const actor = p.role === 'tenant' ? actorOf(p, bearer(req)) : undefined;
      const s = await schedules.setPaused(tenant, param(req.params.id), action === 'pause', actor);
      if (!s) return void notFound(res);
      ctx.log.info({ code: `schedule_${action}d`, tenant, schedule: s.id, ...whoActs(p) }, `schedule ${action}d`);
      res.json(scheduleView(s));
    });
  }
  r.delete('/v1/schedules/:tenant/:id', requireSchedulePrincipal(ctx, true), async (req, res) => {
    const p = principalOfRes(res);
    const tenant = param(req.params.tenant);
    if (!principalSees(p, tenant)) return void notFound(res);
    if (!(await schedules.remove(tenant, param(req.params.id)))) return void notFound(res);
    ctx.log.info(
      { code: 'schedule_deleted', tenant, schedule: param(req.params.id), ...whoActs(p) },
      'schedule deleted',
    );
    res.status(204).end();
  });
  return r;
}
