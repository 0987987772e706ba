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
 *               run ends `failed` / `compensated: ...` (see compensation.ts). Until then the
 *               original stays in this queue as compensation_required; one not sent (a 429)
 *               is answered 202 with compensationSent: false and the reconciler's sweep sends
 *               it. Repeating the request finishes a compensation left unsettled and never
 *               sends a second one.
 * A finding on a compensation itself (it reached needs_human) finishes it and ends the run.
 * accept     -> on an original whose compensation its service refused (or that was never sent: the item shows
 *               compensationRefused): the effect stands; the finding is recorded in its history (its state,
 *               terminal, unchanged), the run ends `failed` / `compensation_refused: ...` and the item leaves this
 *               queue. Any other item: 409 compensation_not_refused (or not_in_human_queue once accepted).
 *
 * If the process dies between the move and the resume, the run stays
 * needs_human with a settled action; the reconciler or a second POST (409,
 * with the state) shows it, and resuming is safe to repeat.
 */
import { Router } from 'express';
import { z } from 'zod';
import type { EngineContext } from '../../runs/engineContext.js';
import { type Ledger } from '../../ledger/ledger.js';
import { operatorOf, requireOperator } from '../auth.js';
import { actorSeesTenant } from '../../operations/actor.js';
import { invalid, param } from '../../producer/fieldErrors.js';
import { createEffectRunner } from '../../ledger/runner.js';
import { CrashPoints } from '../../config/testHooks.js';
import { Compensations, deliveryRefused } from '../../ledger/compensation.js';
import { resolveHumanItem } from '../../operations/resolve.js';
import { answerOf } from './answers.js';
import { readRun } from '../../store/runRecord.js';
import { LEDGER_STATES } from '../../ledger/states.js';

/** `operator` is accepted for older clients and ignored: the finding records the authenticated operator. */
const findingSchema = z
  .object({
    finding: z.enum(['confirmed', 'not_sent', 'compensate', 'accept']),
    receipt: z.string().min(1).max(200).optional(),
    evidence: z.unknown(),
    operator: z.string().min(1).max(200).optional(),
  })
  .strict()
  .refine((b) => b.finding !== 'confirmed' || b.receipt !== undefined, {
    path: ['receipt'],
    error: 'a confirmed finding needs the receipt',
  })
  .refine((b) => b.finding !== 'accept' || b.receipt === undefined, {
    path: ['receipt'],
    error: 'an accept finding takes no receipt: the effect stands as the ledger holds it',
  });
export { findingSchema };

const historyEntrySchema = z.object({
  from: z.enum(LEDGER_STATES).nullable(),
  to: z.enum(LEDGER_STATES),
  at: z.number().int().meta({ description: 'When the move was recorded (epoch ms).' }),
  by: z.string(),
  why: z.string(),
  evidence: z.unknown().optional(),
});

/** One item of the human queue as GET /v1/reconciliations answers it (the OpenAPI document's schema). */
export const humanItemSchema = z
  .object({
    actionId: z.string(),
    runId: z.string(),
    tenant: z.string().meta({ description: "The run's tenant." }),
    subject: z
      .string()
      .meta({ description: "The run's subject key (e.g. the ticket id): which ticket the item is of." }),
    step: z.number().int(),
    callId: z.string(),
    tool: z.string(),
    state: z.enum(LEDGER_STATES),
    idempotencyKey: z.string(),
    requestId: z.string(),
    fingerprint: z.string(),
    args: z.unknown(),
    receipt: z.string().optional(),
    output: z.unknown().optional(),
    compensates: z.string().optional(),
    compensatedBy: z.string().optional(),
    compensationState: z
      .enum(LEDGER_STATES)
      .optional()
      .meta({ description: "An original in compensation_required: its compensation's ledger state." }),
    compensationRefused: z
      .boolean()
      .optional()
      .meta({
        description:
          'An original in compensation_required: true when its compensation settled without delivering (its service ' +
          'refused it, or it was never sent). It stays here until a person compensates otherwise or accepts it.',
      }),
    approvalExpiresAt: z.number().int().optional(),
    replayUntil: z.number().int().optional(),
    attempts: z.number().int(),
    repeats: z.number().int(),
    createdAt: z.number().int(),
    updatedAt: z.number().int(),
    since: z.number().meta({ description: 'When the item entered the queue (epoch ms).' }),
    history: z.array(historyEntrySchema),
  })
  .meta({ id: 'HumanQueueItem' });
export type HumanItem = z.infer<typeof humanItemSchema>;

/** The human queue with each item's history, those of `tenants` only unless '*' (and of one run when given). */
export async function humanQueue(ctx: EngineContext, ledger: Ledger, tenants: '*' | readonly string[], runId?: string) {
  const items = [];
  const shards = runId !== undefined ? [ctx.keys.shardOf(runId)] : ctx.keys.allShards();
  for (const shard of shards) {
    for (const { actionId, since } of await ledger.indexed(
      ctx.keys.humanQueue(shard),
      Number.POSITIVE_INFINITY,
      1000,
    )) {
      const rec = await ledger.getInShard(shard, actionId);
      if (!rec) {
        // The record is gone: nobody can decide it, so the entry leaves the queue. A run held for a person keeps its
        // records (includes/expireRun.lua), so this is a record lost some other way (an eviction, a key deleted by
        // hand): an effect's outcome never settled. Said, and counted, once (the first reader's zrem), ids only.
        if ((await ctx.redis.zrem(ctx.keys.humanQueue(shard), actionId)) === 1) {
          ctx.metrics.humanItemsExpired.inc();
          ctx.log.error(
            { code: 'human_item_expired', actionId, shard, since },
            "a human-queue item's ledger record is gone: its outcome was never settled; the item left the queue",
          );
        }
        continue;
      }
      if (runId !== undefined && rec.runId !== runId) continue;
      const run = await readRun(ctx.redis, ctx.keys, rec.runId, ['tenant', 'key']);
      if (tenants !== '*' && !actorSeesTenant({ tenants }, run?.tenant ?? null)) continue;
      // Why an original in compensation_required is still here: its compensation is pending, or was refused.
      const comp = rec.compensatedBy ? await ledger.get(rec.runId, rec.compensatedBy) : undefined;
      // Which subject (ticket) the item is of: the queue is worked ticket by ticket.
      const item: HumanItem = {
        ...rec,
        ...(comp ? { compensationState: comp.state, compensationRefused: deliveryRefused(comp) } : {}),
        tenant: run?.tenant ?? '',
        subject: run?.key ?? '',
        since,
        history: await ledger.history(rec.runId, actionId),
      };
      items.push(item);
    }
  }
  return items;
}

/** The compensation driver of operator findings (one per process). */
export function operatorCompensations(ctx: EngineContext, ledger: Ledger): Compensations {
  return new Compensations(
    ctx,
    ledger,
    createEffectRunner(ctx, { workerId: `operator-api:${process.pid}`, crash: new CrashPoints([]) }),
  );
}

export function reconciliationsRouter(
  ctx: EngineContext,
  ledger: Ledger,
  compensations = operatorCompensations(ctx, ledger),
): Router {
  const r = Router();

  r.get('/v1/reconciliations', requireOperator(ctx, 'viewer'), async (_req, res) => {
    res.json({ reconciliations: await humanQueue(ctx, ledger, operatorOf(res).tenants) });
  });

  r.post('/v1/reconciliations/:actionId', requireOperator(ctx, 'operator'), async (req, res) => {
    const parsed = findingSchema.safeParse(req.body);
    if (!parsed.success) return void invalid(res, parsed.error);
    const { finding, receipt, evidence } = parsed.data;
    const answer = answerOf(
      await resolveHumanItem(ctx, ledger, compensations, operatorOf(res), param(req.params.actionId), {
        finding,
        receipt,
        evidence,
      }),
    );
    res.status(answer.status).json(answer.body);
  });
  return r;
}
