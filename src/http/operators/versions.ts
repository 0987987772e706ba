/**
 * The version queue, for operators (src/runs/versionQueue.ts):
 *
 *   GET  /v1/operators/version-mismatches?limit=N        runs parked for a version change, newest first,
 *                                                        each with the versions live workers serve for its agent,
 *                                                        and their total (a tenant-scoped operator: its tenants')
 *   POST /v1/operators/version-mismatches/:runId/continue {agentVersion?, toolsHash?}
 *   POST /v1/operators/version-mismatches/:runId/cancel
 *
 * Continue re-pins the run to a version live workers serve (the one named, or
 * the only one served; several served and none named is 409
 * `ambiguous_version` listing them) and resumes it, journalled with the
 * authenticated operator's name, in one script. The ledger is untouched:
 * effects recorded under the old version are answered from it, never redone.
 * Tools the new version no longer has: a journalled call to one is answered
 * `unknown_tool` to the model (never dispatched); a run with an unsettled ledger
 * action of such a tool (planned, authorized, dispatched, outcome_unknown,
 * safe_retry, needs_human) is refused (409 `unsettled_actions_of_vanished_tools`,
 * naming them): no worker of the new version could settle it; resolve it in the
 * human queue, or cancel. Cancel is the run's ordinary cancel, only for a run in
 * the version queue. Each decision counts in agent_version_decisions_total.
 */
import { Router } from 'express';
import { z } from 'zod';
import type { EngineContext } from '../../runs/engineContext.js';
import type { Ledger } from '../../ledger/ledger.js';
import { VersionRegistry } from '../../runs/versions.js';
import { cancelVersionRun, continueVersionRun, versionQueue } from '../../operations/continueVersion.js';
import { operatorOf, requireOperator } from '../auth.js';
import { answerOf } from './answers.js';
import { invalid, param } from '../../producer/fieldErrors.js';

export const VERSION_QUEUE_PATH = '/v1/operators/version-mismatches';

export const versionListQuerySchema = z
  .object({ limit: z.coerce.number().int().min(1).max(500).default(100) })
  .strict();
const VERSION = /^[\w.@+:/-]{1,200}$/;
export const continueSchema = z
  .object({
    agentVersion: z.string().regex(VERSION, 'agentVersion: 1-200 letters, digits or _ . @ + : / -').optional(),
    toolsHash: z
      .string()
      .regex(/^[0-9a-f]{16}$/, 'toolsHash: 16 lowercase hex digits')
      .optional(),
  })
  .strict()
  .refine((b) => b.toolsHash === undefined || b.agentVersion !== undefined, {
    path: ['agentVersion'],
    error: 'a toolsHash needs its agentVersion',
  });

export function versionsRouter(ctx: EngineContext, ledger: Ledger): Router {
  const r = Router();
  const registry = new VersionRegistry(ctx.redis, ctx.keys, ctx.cfg.VERSION_TTL_MS);
  r.get(VERSION_QUEUE_PATH, requireOperator(ctx, 'viewer'), async (req, res) => {
    const parsed = versionListQuerySchema.safeParse(req.query);
    if (!parsed.success) return void invalid(res, parsed.error);
    res.json(await versionQueue(ctx, registry, operatorOf(res), parsed.data.limit));
  });
  r.post(`${VERSION_QUEUE_PATH}/:id/continue`, requireOperator(ctx, 'operator'), async (req, res) => {
    const parsed = continueSchema.safeParse(req.body ?? {});
    if (!parsed.success) return void invalid(res, parsed.error);
    const answer = answerOf(
      await continueVersionRun(ctx, ledger, registry, operatorOf(res), param(req.params.id), parsed.data),
    );
    res.status(answer.status).json(answer.body);
  });
  r.post(`${VERSION_QUEUE_PATH}/:id/cancel`, requireOperator(ctx, 'operator'), async (req, res) => {
    const parsed = z
      .object({})
      .strict()
      .safeParse(req.body ?? {});
    if (!parsed.success) return void invalid(res, parsed.error);
    const answer = answerOf(await cancelVersionRun(ctx, operatorOf(res), param(req.params.id)));
    res.status(answer.status).json(answer.body);
  });
  return r;
}
