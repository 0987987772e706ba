/**
 * Flow control for operators: GET /v1/flow (each tenant's line and share, the agents' slots, the
 * rate limits' recent token use, the latest changes) and PUT /v1/flow/tenants/:tenant {weight?, limit?}
 * and PUT /v1/flow/agents/:agent {limit}: run-time changes, recorded under the authenticated operator
 * (src/flow/admission.ts, configure). `null` puts a value back to the configured one. Changes need an
 * operator who sees every tenant (a weight or a limit moves the others' share too); a tenant-scoped
 * operator reads only its own tenants' lines, without the figures that count other tenants' runs
 * (ScopedFlowView). A malformed body is 400 naming the field, nothing written.
 */
import { Router, type Response } from 'express';
import { z } from 'zod';
import type { EngineContext } from '../../runs/engineContext.js';
import { operatorOf, requireOperator } from '../auth.js';
import { invalid, param } from '../../producer/fieldErrors.js';
import { readFlowView, type FlowView, type ScopedFlowView } from '../../flow/view.js';
import { settingProblem, type FlowSetting } from '../../flow/admission.js';
import { FLOW_WEIGHT_MAX, FLOW_WEIGHT_MIN } from '../../core/flowWeight.js';
import type { Operator } from '../operatorIdentity.js';

const limitSchema = z.number().int().min(0).max(1_000_000).nullable();
export const tenantFlowBodySchema = z
  .object({
    weight: z.number().min(FLOW_WEIGHT_MIN).max(FLOW_WEIGHT_MAX).nullable().optional(),
    limit: limitSchema.optional(),
    maxWaiting: limitSchema.optional(),
  })
  .strict()
  .refine(
    (b) => b.weight !== undefined || b.limit !== undefined || b.maxWaiting !== undefined,
    'weight, limit or maxWaiting',
  );
export const agentFlowBodySchema = z.object({ limit: limitSchema }).strict();

/**
 * The view an operator may see: a tenant-scoped one only its tenants' lines (and no one else's changes), without a
 * line's share, the agents' slots or the fleet's (ScopedFlowView says why). Built field by field, so a figure added
 * to FlowView stays out of it until it is known to be the tenant's own.
 */
export async function flowViewFor(ctx: EngineContext, op: Operator): Promise<FlowView | ScopedFlowView> {
  const v = await readFlowView(ctx.redis, ctx.keys, ctx.cfg, Date.now());
  if (op.tenants === '*') return v;
  const mine = new Set(op.tenants);
  // Rate limit buckets are `provider/model`, shared, or `provider/model/tenant`.
  const visibleBucket = (bucket: string) => {
    const parts = bucket.split('/');
    return parts.length === 2 || mine.has(parts[2] ?? '');
  };
  return {
    enabled: v.enabled,
    tenants: v.tenants
      .filter((t) => mine.has(t.tenant))
      .map(({ tenant, waiting, maxWaiting, oldestWaitingMs, held, admitted, weight, limit }) => ({
        tenant,
        waiting,
        maxWaiting,
        oldestWaitingMs,
        held,
        admitted,
        weight,
        limit,
      })),
    changes: v.changes.filter((c) => mine.has(c.of)),
    rates: v.rates.filter((r) => visibleBucket(r.bucket)),
  };
}

export function flowRouter(ctx: EngineContext): Router {
  const r = Router();
  r.get('/v1/flow', requireOperator(ctx, 'viewer'), async (_req, res) => {
    res.json(await flowViewFor(ctx, operatorOf(res)));
  });
  const change = async (
    res: Response,
    what: FlowSetting,
    of: string,
    value: number | null | undefined,
  ): Promise<boolean> => {
    if (value === undefined) return true;
    const problem = settingProblem(what, of, value);
    if (problem) {
      res.status(400).json({
        error: 'invalid_request',
        fields: [{ path: problem.slice(0, problem.indexOf(':')), message: problem }],
      });
      return false;
    }
    await ctx.admission!.configure(what, of, value, operatorOf(res).name);
    return true;
  };
  const everyTenant = (res: Response): boolean => {
    if (operatorOf(res).tenants === '*') return true;
    res
      .status(403)
      .json({ error: 'forbidden', message: 'changing a weight or a limit needs an operator who sees every tenant' });
    return false;
  };
  r.put('/v1/flow/tenants/:tenant', requireOperator(ctx, 'operator'), async (req, res) => {
    const parsed = tenantFlowBodySchema.safeParse(req.body ?? {});
    if (!parsed.success) return void invalid(res, parsed.error);
    if (!everyTenant(res)) return;
    const tenant = param(req.params.tenant);
    if (
      !(await change(res, 'weight', tenant, parsed.data.weight)) ||
      !(await change(res, 'limit', tenant, parsed.data.limit)) ||
      !(await change(res, 'max_waiting', tenant, parsed.data.maxWaiting))
    )
      return;
    res.json({ tenant, ...parsed.data, by: operatorOf(res).name });
  });
  r.put('/v1/flow/agents/:agent', requireOperator(ctx, 'operator'), async (req, res) => {
    const parsed = agentFlowBodySchema.safeParse(req.body ?? {});
    if (!parsed.success) return void invalid(res, parsed.error);
    if (!everyTenant(res)) return;
    const agent = param(req.params.agent);
    if (!(await change(res, 'agent_limit', agent, parsed.data.limit))) return;
    res.json({ agent, ...parsed.data, by: operatorOf(res).name });
  });
  return r;
}
