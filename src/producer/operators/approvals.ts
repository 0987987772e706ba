/**
 * Operator routes of approvals: list the pending ones (with the exact
 * arguments and the fingerprint an approval binds to) and decide one.
 */
import { Router } from 'express';
import { z } from 'zod';
import type { AppContext } from '../../bin/context.js';
import { APPROVAL_VOID } from '../../ledger/approvals.js';
import { Ledger, LedgerConflict } from '../../ledger/ledger.js';
import { actionNotFound, requireToken } from '../auth.js';
import { isActionId } from '../../store/keys.js';
import { resumeParked } from '../../runs/resume.js';
import { stopRun } from '../../runs/stop.js';
import { isTerminal } from '../../runs/status.js';
import { invalid, param } from './http.js';

const decisionSchema = z.object({
  decision: z.enum(['approve', 'reject']),
  fingerprint: z.string().min(1).max(128),
  approver: z.string().min(1).max(200),
}).strict();

export function approvalsRouter(ctx: AppContext, ledger: Ledger): Router {
  const r = Router();
  const operator = requireToken(ctx.cfg.OPERATOR_TOKEN, 'operator');

  r.get('/v1/approvals', operator, async (_req, res) => {
    const approvals = [];
    for (const shard of ctx.keys.allShards()) {
      for (const { actionId, since: expiresAt } of await ledger.indexed(ctx.keys.approvals(shard), Number.POSITIVE_INFINITY, 1000)) {
        const rec = await ledger.getInShard(shard, actionId);
        if (!rec || rec.state !== 'planned') continue;
        const [tenant, status] = (await ctx.redis.hmget(ctx.keys.run(rec.runId).run, 'tenant', 'status')) as (string | null)[];
        if (!status || isTerminal(status)) continue; // void: a decision would authorise nothing
        approvals.push({ actionId, runId: rec.runId, tenant: tenant ?? '', step: rec.step, tool: rec.tool, args: rec.args, fingerprint: rec.fingerprint, expiresAt, createdAt: rec.createdAt });
      }
    }
    res.json({ approvals });
  });

  r.post('/v1/approvals/:actionId', operator, async (req, res) => {
    const parsed = decisionSchema.safeParse(req.body);
    if (!parsed.success) return void invalid(res, parsed.error);
    const { decision, fingerprint, approver } = parsed.data;
    const actionId = param(req.params.actionId);
    if (!isActionId(actionId)) return actionNotFound(res);
    const rec = await ledger.locate(actionId);
    if (!rec) return actionNotFound(res);
    let result;
    try {
      result = await ledger.decideApproval(rec.runId, actionId, decision, fingerprint, approver, decision === 'approve' ? 'approved by an operator' : 'rejected by an operator');
    } catch (err) {
      if (err instanceof LedgerConflict) return void res.status(409).json({ error: 'not_pending', actionId, state: err.actual });
      throw err;
    }
    if (result.outcome === 'fingerprint_mismatch') return void res.status(409).json({ error: 'fingerprint_mismatch', actionId });
    if (result.outcome === 'void' || result.decision.approver === APPROVAL_VOID) {
      // The run finished while it waited (cancelled, say): the approval authorises nothing.
      return void res.status(409).json({ error: 'run_finished', ...result.decision });
    }
    if (result.outcome === 'expired' || result.decision.reason === 'approval_expired') {
      await stopRun(ctx, rec.runId, { expected: ['waiting_approval'], status: 'failed', reason: 'approval_expired', now: Date.now() });
      await ctx.redis.zrem(ctx.keys.approvals(ctx.keys.shardOf(rec.runId)), actionId);
      return void res.status(409).json({ error: 'approval_expired', ...result.decision });
    }
    // Every caller resumes: if the first decider died before resuming, the second (or the sweep) finishes the job.
    await resumeParked(ctx, rec.runId, 'waiting_approval');
    await ctx.redis.zrem(ctx.keys.approvals(ctx.keys.shardOf(rec.runId)), actionId);
    res.json({ ...result.decision, alreadyDecided: result.outcome === 'already_decided' });
  });
  return r;
}
