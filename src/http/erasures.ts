/**
 * POST /v1/erasures (operators with the operator role, for a tenant they see): forget a customer. The body names the
 * tenant and a subject (the agent's subject key, e.g. a ticket id) and/or an agent's search field and value; every
 * run found (Redis' search indexes and subject chains, the archive's rows when ARCHIVE_URL is set) has its customer
 * text replaced in Redis and in the archive, keeping ids, statuses, receipts, keys and
 * times (src/archive/erasure.ts). 201 with the erasure's record (who asked and when, the runs rewritten);
 * 409 `runs_at_work` naming the runs not ended, or `actions_unsettled` naming the ledger actions of ended runs that may
 * have left and have not settled (dispatched, outcome_unknown, needs_human: a person still to find an effect's outcome;
 * nothing erased either way); an ended run's action that never left (planned, authorized, safe_retry) is moved to
 * `rejected` by the erasure itself; 400 naming the field.
 */
import { Router } from 'express';
import { z } from 'zod';
import type { EngineContext } from '../runs/engineContext.js';
import { operatorOf, requireOperator } from './auth.js';
import { actorSeesTenant } from '../operations/actor.js';
import { invalid } from '../producer/fieldErrors.js';
import { tenantSchema } from '../producer/schemas.js';
import { eraseCustomer, type ErasureRecord } from '../archive/erasure.js';
import { LEDGER_STATES } from '../ledger/states.js';

export const ERASURES_PATH = '/v1/erasures';

export const erasureSchema = z
  .object({
    tenant: tenantSchema,
    /** The subject key (agent.key(input)) whose runs to erase. */
    subject: z.string().min(1).max(1000).optional(),
    /** An agent's search field and its value (Agent.search): its runs from Redis' search index and the archive's. */
    field: z
      .object({
        name: z.string().regex(/^[\w.-]{1,100}$/, '1-100 letters, digits or _ . -'),
        value: z.string().min(1).max(1000),
      })
      .strict()
      .optional(),
  })
  .strict()
  .refine((b) => b.subject !== undefined || b.field !== undefined, {
    error: 'name a subject or a field',
    path: ['subject'],
  });

/** The 201 answer: the erasure's record as kept in Redis and the archive (ErasureRecord). */
export const erasureRecordSchema = z
  .object({
    erasureId: z.string(),
    tenant: z.string(),
    subject: z.string().optional(),
    field: z
      .object({
        name: z.string(),
        valueSalt: z.string().meta({ description: 'A random salt (hex), new for each erasure' }),
        valueSha256: z.string().meta({
          description:
            'sha256 (hex) of valueSalt followed by the value: the value itself is kept nowhere, and no table of common values reverses it',
        }),
      })
      .strict()
      .optional(),
    requestedBy: z.string().meta({ description: 'The operator who asked' }),
    requestedAt: z.string().meta({ description: 'ISO 8601' }),
    runIds: z
      .array(z.string())
      .meta({ description: 'Runs whose customer text was replaced, in Redis, in the archive, or both' }),
  })
  .strict()
  .meta({ id: 'ErasureRecord' });

/** The 409 answer: runs of the request not ended (nothing written, or only the runs that raced back to work). */
export const runsAtWorkSchema = z
  .object({ error: z.literal('runs_at_work'), message: z.string(), runIds: z.array(z.string()) })
  .strict()
  .meta({ id: 'RunsAtWork' });

/** The 409 answer: ledger actions of the runs found not settled (nothing written). */
export const actionsUnsettledSchema = z
  .object({
    error: z.literal('actions_unsettled'),
    message: z.string(),
    actions: z.array(
      z
        .object({
          actionId: z.string(),
          runId: z.string(),
          state: z.enum(LEDGER_STATES),
        })
        .strict(),
    ),
  })
  .strict()
  .meta({ id: 'ActionsUnsettled' });

// The documented record and the one the erasure builds stay one shape.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
export const recordShapeMatches: Same<z.infer<typeof erasureRecordSchema>, ErasureRecord> = true;

export function erasuresRouter(ctx: EngineContext): Router {
  const r = Router();
  r.post(ERASURES_PATH, requireOperator(ctx, 'operator'), async (req, res) => {
    const parsed = erasureSchema.safeParse(req.body ?? {});
    if (!parsed.success) return void invalid(res, parsed.error);
    const body = parsed.data;
    const op = operatorOf(res);
    if (!actorSeesTenant(op, body.tenant)) {
      return void res.status(403).json({ error: 'forbidden', message: `operator ${op.name} does not see tenant` });
    }
    const out = await eraseCustomer(ctx, body, op.name);
    if (out.kind === 'at_work') {
      const body: z.infer<typeof runsAtWorkSchema> = {
        error: 'runs_at_work',
        message: 'runs not ended cannot be erased: cancel them or wait for their end, then ask again',
        runIds: out.runIds,
      };
      return void res.status(409).json(body);
    }
    if (out.kind === 'actions_unsettled') {
      const body: z.infer<typeof actionsUnsettledSchema> = {
        error: 'actions_unsettled',
        message:
          'an effect of these runs has not settled (its outcome unknown, or a person must find it in the human ' +
          'queue): its arguments are what is looked up at the service. Settle it (POST /v1/reconciliations/:actionId), ' +
          'then ask again',
        actions: out.actions,
      };
      return void res.status(409).json(body);
    }
    const record: z.infer<typeof erasureRecordSchema> = out.record;
    res.status(201).json(record);
  });
  return r;
}
