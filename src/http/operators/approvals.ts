/**
 * Operator routes of approvals: list the pending ones (with the exact
 * arguments and the fingerprint an approval binds to) and decide one.
 */
import { Router } from 'express';
import { z } from 'zod';
import type { EngineContext } from '../../runs/engineContext.js';
import { type Ledger } from '../../ledger/ledger.js';
import { operatorOf, requireOperator } from '../auth.js';
import { actorSeesTenant } from '../../operations/actor.js';
import { decideApproval } from '../../operations/approve.js';
import { answerOf } from './answers.js';
import { invalid, param } from '../../producer/fieldErrors.js';
import { isTerminal } from '../../core/status.js';
import { readRun } from '../../store/runRecord.js';

/**
 * `approver` is accepted for older clients and ignored: the recorded approver is the
 * authenticated operator (the answer's `approver` says who was recorded).
 */
export const decisionSchema = z
  .object({
    decision: z.enum(['approve', 'reject']),
    fingerprint: z.string().min(1).max(128),
    approver: z.string().min(1).max(200).optional(),
  })
  .strict();

export interface PendingApproval {
  actionId: string;
  runId: string;
  tenant: string;
  step: number;
  tool: string;
  args: unknown;
  fingerprint: string;
  expiresAt: number;
  createdAt: number;
}

/** Pending approvals of runs still parked, those of `tenants` only unless '*'. */
export async function pendingApprovals(
  ctx: EngineContext,
  ledger: Ledger,
  tenants: '*' | readonly string[],
  runId?: string,
): Promise<PendingApproval[]> {
  const approvals: PendingApproval[] = [];
  const shards = runId !== undefined ? [ctx.keys.shardOf(runId)] : ctx.keys.allShards();
  for (const shard of shards) {
    for (const { actionId, since: expiresAt } of await ledger.indexed(
      ctx.keys.approvals(shard),
      Number.POSITIVE_INFINITY,
      1000,
    )) {
      const rec = await ledger.getInShard(shard, actionId);
      if (!rec || rec.state !== 'planned' || (runId !== undefined && rec.runId !== runId)) continue;
      const run = await readRun(ctx.redis, ctx.keys, rec.runId, ['tenant']);
      if (!run || isTerminal(run.status)) continue; // void: a decision would authorise nothing
      if (!actorSeesTenant({ tenants }, run.tenant)) continue;
      approvals.push({
        actionId,
        runId: rec.runId,
        tenant: run.tenant,
        step: rec.step,
        tool: rec.tool,
        args: rec.args,
        fingerprint: rec.fingerprint,
        expiresAt,
        createdAt: rec.createdAt,
      });
    }
  }
  return approvals;
}

export function approvalsRouter(ctx: EngineContext, ledger: Ledger): Router {
  const r = Router();

  r.get('/v1/approvals', requireOperator(ctx, 'viewer'), async (_req, res) => {
    res.json({ approvals: await pendingApprovals(ctx, ledger, operatorOf(res).tenants) });
  });

  r.post('/v1/approvals/:actionId', requireOperator(ctx, 'operator'), async (req, res) => {
    const parsed = decisionSchema.safeParse(req.body);
    if (!parsed.success) return void invalid(res, parsed.error);
    const { decision, fingerprint } = parsed.data;
    const answer = answerOf(
      await decideApproval(ctx, ledger, operatorOf(res), param(req.params.actionId), decision, fingerprint),
    );
    res.status(answer.status).json(answer.body);
  });
  return r;
}
