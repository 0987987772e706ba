/**
 * Approvals: which write actions wait for a person (cfg.APPROVAL_RULES), and
 * the expiry sweep of pending ones.
 *
 * The approval binds to the action's fingerprint (sha256 of its material
 * arguments, on the ledger record since `planned`): an approver approves the
 * exact arguments they were shown. The claim is one script
 * (src/store/lua/approvalDecide-4.lua), so two approvers racing produce one decision.
 *
 * A pending approval exists only for a parked run: the park's commit records
 * it (commitStep), so it cannot expire before the run parks, and a cancel that
 * wins over the park leaves none.
 *
 * If the process dies: after the decision and before the resume, the run stays
 * `waiting_approval` with a decided action; a repeated POST returns the first
 * decision and resumes it. During the sweep: the action is rejected first, the
 * run is stopped second, the index entry removed last; a rerun of the sweep
 * finds the entry, the action already rejected as expired, and stops the run.
 */
import type { EngineContext } from '../runs/engineContext.js';
import type { Config } from '../config/config.js';
import type { WriteTool } from '../core/tool.js';
import { type Ledger, ledgerFor, LedgerConflict } from './ledger.js';
import type { ApprovalPolicy } from './runner.js';
import { stopRun } from '../runs/stop.js';
import type { ResumeResult } from '../store/calls/resumeRun.js';
import { errorCode, FenceError } from '../core/errors.js';
import { readRun } from '../store/runRecord.js';

export type ApprovalRule = Config['APPROVAL_RULES'][number];

/** The approver recorded on an approval voided because its run finished (also in approvalDecide-4.lua). */
export const APPROVAL_VOID = 'approval_void';

/** A rule matches on tool, optional tenant and, when given, args.amountCents >= minAmountCents. */
export function ruleMatches(rule: ApprovalRule, tenant: string, tool: string, args: unknown): boolean {
  if (rule.tool !== tool) return false;
  if (rule.tenant !== undefined && rule.tenant !== tenant) return false;
  if (rule.minAmountCents !== undefined) {
    const amount = (args as { amountCents?: unknown } | null)?.amountCents;
    // No amount on an amount rule: ask a person rather than guess.
    if (typeof amount !== 'number') return true;
    return amount >= rule.minAmountCents;
  }
  return true;
}

export function approvalPolicy(rules: readonly ApprovalRule[]): ApprovalPolicy {
  return {
    requiresApproval(tenant: string, tool: WriteTool, args: unknown): boolean {
      return rules.some((r) => ruleMatches(r, tenant, tool.name, args));
    },
  };
}

/**
 * Rejects every pending approval whose expiry is at or before `now`
 * (why: approval_expired) and ends its run: `failed`, reason approval_expired,
 * only if the run is still `waiting_approval`. Also finishes a person's
 * decision whose resume was lost: its run, still waiting for that approval
 * RECONCILER_MIN_AGE_MS after the decision, is resumed. Returns the expired action ids.
 */
export async function expireApprovals(ctx: EngineContext, now: number, limit = 100): Promise<string[]> {
  const ledger = ledgerFor(ctx, () => now);
  const expired: string[] = [];
  for (const shard of ctx.keys.allShards()) {
    // Entries left in the index (a decision too young to call lost, one that failed) are paged past, so however
    // many sit at its head they never keep the ones behind them from expiring.
    await ledger.walkDue(
      ctx.keys.approvals(shard),
      now,
      async (actionId) => {
        // One approval that cannot be settled is named, counted and left for the next pass: it never stops the
        // expiry of every other one.
        try {
          if (await expireOne(ctx, ledger, shard, actionId, now)) expired.push(actionId);
        } catch (err) {
          const code = errorCode(err);
          ctx.metrics.sweepActionFailures.inc({ code, outcome: 'left_open' });
          ctx.log.error(
            { code: 'approval_expiry_failed', actionId, error: code },
            'the sweep could not settle an approval',
          );
        }
      },
      { pageSize: limit },
    );
  }
  return expired;
}

/**
 * One due entry of the approvals index: an expired approval rejected and its run stopped (true), a decision whose
 * resume was lost resumed or voided, a gone record dropped. The entry leaves the index last.
 */
async function expireOne(
  ctx: EngineContext,
  ledger: Ledger,
  shard: number,
  actionId: string,
  now: number,
): Promise<boolean> {
  const index = ctx.keys.approvals(shard);
  const rec = await ledger.getInShard(shard, actionId);
  if (!rec) {
    await ctx.redis.zrem(index, actionId);
    return false;
  }
  if (rec.state === 'planned') {
    await ledger.decideApproval(rec.runId, actionId, 'reject', '', 'approval_expiry', 'approval_expired');
  }
  const decision = await ledger.approvalDecision(rec.runId, actionId);
  let expired = false;
  if (decision?.reason === 'approval_expired') {
    try {
      await stopRun(ctx, rec.runId, {
        expected: ['waiting_approval'],
        status: 'failed',
        reason: 'approval_expired',
        now,
      });
    } catch (err) {
      if (!(err instanceof FenceError && err.code === 'run_missing')) throw err; // the run's keys expired: nothing to stop
    }
    expired = true;
  } else if (decision && decision.approver !== APPROVAL_VOID) {
    // A person decided and the operator route resumes the run at once: an entry still
    // here later is a resume that was lost (the route's process died). Resume it now,
    // or void the decision when its run will not run it (ended, superseded).
    if (decision.decidedAt > now - ctx.cfg.RECONCILER_MIN_AGE_MS) return false;
    const run = await readRun(ctx.redis, ctx.keys, rec.runId, ['approvalFor']);
    const status = run?.status;
    const approvalFor = run?.approvalFor;
    if (status === 'waiting_approval' && (!approvalFor || approvalFor === actionId))
      await settleUnresumed(ctx, rec.runId, actionId, await ctx.store.resume(rec.runId, 'waiting_approval', now));
    else if (status === 'cancelled') await settleUnresumed(ctx, rec.runId, actionId, { resumed: false, status });
  }
  // Last: until the run is stopped or resumed, the entry is what brings a rerun back here.
  await ctx.redis.zrem(index, actionId);
  return expired;
}

/**
 * Withdraws the pending approvals of a run that was ended while it waited
 * (an operator's cancel): each is rejected with `why` (approver APPROVAL_VOID) and leaves the approvals
 * index, so nobody is asked to decide for a finished run. An action approved just before the cancel
 * (authorized, its run not resumed yet) ends `rejected` with the cancel as evidence. If the process dies
 * first, nothing is lost: a decision on it is void (approvalDecide-4.lua), the
 * list hides it, and the expiry sweep removes it.
 */
export async function withdrawApprovals(ctx: EngineContext, runId: string, why: string): Promise<string[]> {
  const ledger = ledgerFor(ctx);
  const withdrawn: string[] = [];
  for (const rec of await ledger.listForRun(runId)) {
    // Approved just before the cancel, not resumed yet: the run will never send it.
    if (rec.state === 'authorized') {
      const evidence = { runStatus: 'cancelled', cancelReason: why };
      if ((await voidAuthorized(ctx, runId, rec.actionId, evidence)) === 'rejected') withdrawn.push(rec.actionId);
      continue;
    }
    if (rec.state !== 'planned' || rec.approvalExpiresAt === undefined) continue;
    const r = await ledger.decideApproval(runId, rec.actionId, 'reject', '', APPROVAL_VOID, why);
    if (r.outcome === 'decided') withdrawn.push(rec.actionId);
  }
  return withdrawn;
}

/** Why a person's decision authorised nothing: the run's status, its cancel's reason, the run that superseded it. */
export interface VoidedDecision {
  runStatus: string;
  cancelReason?: string;
  laterRunId?: string;
  /** The parent that took this child run's outcome and moved on (RunStore.resume). */
  parentRunId?: string;
  /** The field at which the run's stored spec no longer parses (RunStore.resume): no step could run it. */
  invalidSpec?: string;
  /** The action's state afterwards (`rejected`: never sent). */
  state: string;
}

/**
 * After a person's decision, its run did not come back to work (resumeRun-12.lua): when the run
 * was cancelled meanwhile (a cancel that landed between the decision and the resume), a later run of its
 * subject superseded it, it is a child run whose parent took its outcome and moved on, or its stored spec no longer
 * parses, the decision is void. An `authorized` action ends `rejected` with the run's end as evidence (never left
 * authorized on a run that will not run it); a run that waited for this approval and that nothing else would end
 * ends: `failed` / `superseded: <later run>`, `cancelled` / `parent_moved_on: <parent>`, or `failed` /
 * `invalid_spec: <field>` (what its step would have ended it with).
 * Undefined otherwise (another caller resumed it): the decision stands.
 */
export async function settleUnresumed(
  ctx: EngineContext,
  runId: string,
  actionId: string,
  r: ResumeResult,
): Promise<VoidedDecision | undefined> {
  if (r.resumed) return undefined;
  const laterRunId = 'laterRunId' in r ? r.laterRunId : undefined;
  const parentRunId = 'parentRunId' in r ? r.parentRunId : undefined;
  const invalidSpec = 'unreadableSpec' in r ? r.unreadableSpec : undefined;
  // A waiting_approval run ends without coming back to work only by a cancel (an expiry rejects the action
  // itself): any other status means another caller resumed it and the decision took effect.
  if (laterRunId === undefined && parentRunId === undefined && invalidSpec === undefined && r.status !== 'cancelled')
    return undefined;
  const run = await readRun(ctx.redis, ctx.keys, runId, ['cancelReason']);
  const runStatus = run?.status ?? 'missing';
  const cancelReason = run?.cancelReason;
  const evidence = {
    runStatus,
    ...(cancelReason ? { cancelReason } : {}),
    ...(laterRunId ? { laterRunId } : {}),
    ...(parentRunId ? { parentRunId } : {}),
    ...(invalidSpec ? { invalidSpec } : {}),
  };
  const state = await voidAuthorized(ctx, runId, actionId, evidence);
  // Nothing else would end it: a superseded run, a child whose parent took its outcome and moved on, a run no step
  // can read.
  const end =
    laterRunId !== undefined
      ? { status: 'failed' as const, reason: `superseded: ${laterRunId}` }
      : parentRunId !== undefined
        ? { status: 'cancelled' as const, reason: `parent_moved_on: ${parentRunId}` }
        : invalidSpec !== undefined
          ? { status: 'failed' as const, reason: `invalid_spec: ${invalidSpec}` }
          : undefined;
  if (end && runStatus === 'waiting_approval')
    await stopRun(ctx, runId, { expected: ['waiting_approval'], ...end, now: Date.now() });
  ctx.metrics.approvalsVoided.inc({ why: voidWhy(evidence) });
  ctx.log.info({ code: 'approval_void', runId, actionId, ...evidence }, 'decision void: the run will not run it');
  return { ...evidence, state };
}

/** Why a decision is void, as the metric and the rejected action name it. */
function voidWhy(evidence: { laterRunId?: string; parentRunId?: string; invalidSpec?: string }) {
  if (evidence.laterRunId) return 'superseded';
  if (evidence.parentRunId) return 'parent_moved_on';
  return evidence.invalidSpec ? 'invalid_spec' : 'run_finished';
}

/** authorized -> rejected (never sent), with why the run will not send it; a lost race leaves what won. */
async function voidAuthorized(
  ctx: EngineContext,
  runId: string,
  actionId: string,
  evidence: Record<string, string>,
): Promise<string> {
  const ledger = ledgerFor(ctx);
  const rec = await ledger.get(runId, actionId);
  if (rec?.state !== 'authorized') return rec?.state ?? 'missing';
  const why =
    evidence.laterRunId || evidence.parentRunId || evidence.invalidSpec
      ? voidWhy(evidence)
      : `run_${evidence.runStatus}`;
  try {
    await ledger.transition(
      runId,
      actionId,
      'authorized',
      'rejected',
      { by: APPROVAL_VOID, why: `approval void: ${why}`, evidence },
      { output: JSON.stringify({ rejected: true, reason: why, ...evidence }) },
    );
    return 'rejected';
  } catch (err) {
    if (err instanceof LedgerConflict) return err.actual;
    throw err;
  }
}
