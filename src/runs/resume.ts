/** Resuming a parked run after an operator decision, tolerant of the park's commit still being in flight. */
import type { ResumeResult } from '../store/calls/resumeRun.js';
import type { EngineContext } from './engineContext.js';

const SETTLE_POLL_MS = 50;

/**
 * Resumes the run from `expected`. The runner moves an action to needs_human
 * before the step commits the parked status, so a quick operator can decide
 * while the run still reads `running`: then this waits up to `settleMs` for the
 * park to land. (An approval request is recorded by the park's own commit.) A
 * second call is a no-op (resume is fenced on the status). A run a later run of its
 * subject superseded is not resumed (`laterRunId`, resumeRun-12.lua), nor a child run whose parent took its outcome
 * and moved on (`parentRunId`, RunStore.resume), nor a run whose stored spec no longer parses (`unreadableSpec`).
 */
export async function resumeParked(
  ctx: EngineContext,
  runId: string,
  expected: 'waiting_approval' | 'needs_human',
  settleMs = 3000,
): Promise<ResumeResult> {
  const deadline = Date.now() + settleMs;
  for (;;) {
    const r = await ctx.store.resume(runId, expected);
    if (r.resumed) await holdSlot(ctx, runId);
    if ('laterRunId' in r) {
      ctx.metrics.runsSuperseded.inc({ path: expected });
      ctx.log.info({ code: 'run_superseded', runId, laterRunId: r.laterRunId }, 'superseded run not resumed');
    }
    if ('parentRunId' in r)
      ctx.log.info(
        { code: 'child_not_resumed', runId, parentRunId: r.parentRunId, parentStatus: r.parentStatus },
        'child run not resumed: its parent took its outcome and moved on',
      );
    if ('unreadableSpec' in r)
      ctx.log.warn(
        { code: 'spec_unreadable', runId, field: r.unreadableSpec },
        'run not resumed: its stored spec no longer parses',
      );
    if (r.resumed || 'laterRunId' in r || 'parentRunId' in r || 'unreadableSpec' in r) return r;
    if ((r.status !== 'running' && r.status !== 'queued') || Date.now() >= deadline) return r;
    await new Promise((res) => setTimeout(res, SETTLE_POLL_MS));
  }
}

/**
 * Flow control: a run that comes back to work after a person's decision takes a slot at once
 * (src/flow/admission.ts, hold). If the process dies before it, the run works without a slot
 * until it ends (its release then finds nothing to give back).
 */
export async function holdSlot(ctx: EngineContext, runId: string): Promise<void> {
  if (!ctx.admission?.enabled) return;
  const spec = await ctx.store.readSpec(runId);
  if (spec) await ctx.admission.hold({ runId, tenant: spec.tenant, agent: spec.agent }, Date.now());
}
