/**
 * Compensation, executed: an operator's finding `compensate` on an action in
 * the human queue.
 *
 * The engine owns the mechanism, the agent the wording: the run's agent says
 * which write-tool call compensates the action (`compensationFor`), or that
 * none does (undefined, or no rule at all: the action stays with a person and
 * the request is refused). The compensating call is an ordinary action in the
 * effect ledger, with its own action id, idempotency key and request id
 * derived from the original's action id (Ledger.planCompensation), linked both
 * ways (`compensates` on it, `compensatedBy` on the original), and it moves
 * planned -> authorized (by the operator) -> dispatched -> confirmed, sent to
 * the service with that key, exactly like a step's write. The original's
 * history is kept and ends with needs_human -> compensation_required.
 *
 * The run then ENDS: `failed`, reason `compensated: ...` (a person has taken
 * the case over; the agent does not continue after a compensated effect).
 * While the compensation is not confirmed, the run stays `needs_human`.
 *
 * Repeating the request is safe and is how a stuck compensation is finished:
 * planning finds the same action, a confirmed one is never sent again, and a
 * `dispatched` one is looked up at the service before anything is resent.
 * If the process dies: after planning, before the link -> the original is
 * still needs_human, a repeat links it; after `dispatched` -> the reconciler
 * sweeps it by lookup (it is one of the agent's tools), or a repeat does; after
 * `confirmed`, before the run ends -> the reconciler's sweep or a repeat ends it.
 *
 * Nothing unsettled is left unseen: the original stays in the human queue in
 * compensation_required until its compensation is confirmed and the run has
 * ended, and the reconciler sweeps those entries (Reconciler.sweepCompensations):
 * a compensation left planned, authorized or safe_retry (a 429, a crash) is
 * driven again with its key, a confirmed one ends the run. A drive that leaves
 * it unsent says so (`unsettled`, log compensation_unsettled,
 * agent_compensations_unsettled_total).
 *
 * A run at work when its compensation is confirmed (retried, or resumed by a
 * finding on another of its actions, while the compensation was pending; a
 * retry refuses that since retryRun-17.lua) is not ended: the compensation was
 * delivered, the run goes on as the operator ordered, and the original leaves
 * the human queue (log compensated_run_at_work,
 * agent_compensated_runs_at_work_total), where it would otherwise bring every
 * sweep back to a run it cannot end.
 *
 * A compensation its service refused (confirmed with a rejected output) or
 * never sent (rejected) settles without delivering: the original stays in the
 * human queue for a person, who compensates otherwise, or closes it with the
 * finding `accept` (the effect stands: src/operations/resolve.ts).
 */
import { randomUUID } from 'node:crypto';
import type { EngineContext } from '../runs/engineContext.js';
import type { Agent } from '../core/agent.js';
import type { WriteTool } from '../core/tool.js';
import { errorCode, isRetryable, TerminalError } from '../core/errors.js';
import { type Ledger, LedgerConflict, type ActionRecord } from './ledger.js';
import type { LedgerEffectRunner } from './runner.js';
import type { LedgerState } from './states.js';
import type { RunSpec } from '../runs/spec.js';
import { stopRun } from '../runs/stop.js';
import { readRun } from '../store/runRecord.js';
import { isTerminal, type RunStatus } from '../core/status.js';
import { agentSafeParse } from '../core/agentCode.js';

/** States in which driving the compensation further is pointless: a person or nothing is next. */
const SETTLED: ReadonlySet<LedgerState> = new Set(['confirmed', 'rejected', 'needs_human', 'compensation_required']);
const END_SETTLE_MS = 3000;
const POLL_MS = 50;

/**
 * A compensation settled without delivering: its service refused it (recorded confirmed with a rejected output,
 * runner.ts) or it was never sent (rejected). It ends nothing; its original waits for a person's `accept`.
 */
export function deliveryRefused(comp: Pick<ActionRecord, 'state' | 'output'>): boolean {
  if (comp.state === 'rejected') return true;
  return comp.state === 'confirmed' && (comp.output as { rejected?: boolean } | undefined)?.rejected === true;
}

/** An operator asked for a compensation the ledger cannot make (answered as a 409, never retried). */
export class CompensationRefused extends TerminalError {
  constructor(message: string, options?: ErrorOptions) {
    super('compensation_refused', message, {}, options);
  }
}

export interface CompensationResult {
  compensation: ActionRecord;
  /** Another request holds the compensation's lease and is driving it now. */
  inProgress: boolean;
  /**
   * Set when this drive left the compensation neither sent nor with a person (a 429, a service down before the
   * request left): the error's code. The original stays in the human queue and the reconciler's sweep sends it
   * again with the same key.
   */
  unsettled?: { error: string };
  run: { status: RunStatus | 'missing'; reason: string; ended: boolean };
  /** Set when the compensation was delivered while its run was at work: the run goes on, it was not ended. */
  runAtWork?: true;
}

/** Who drives a compensation: an operator's request, or the reconciler's sweep of the human queue. */
export type CompensationDriver = 'operator' | 'sweep';

/**
 * The call that compensates `original`, from the run's agent: its write tool
 * and the arguments that tool's schema accepts. Refused (the action stays with
 * a person) when the agent is not run here, gives no compensation, or names a
 * tool it does not have or arguments that tool refuses.
 */
export function compensationCall(
  original: ActionRecord,
  spec: RunSpec,
  agent: Agent | undefined,
): { tool: WriteTool; args: unknown } {
  if (!agent) throw new CompensationRefused(`the run's agent '${spec.agent}' is not run by this process`);
  const call = agent.compensationFor?.(
    { actionId: original.actionId, tool: original.tool, args: original.args, receipt: original.receipt },
    spec.input,
  );
  if (!call)
    throw new CompensationRefused(
      `agent '${agent.name}' has no compensation for ${original.tool}: the action stays with a person`,
    );
  const tool = agent.tools.get(call.tool);
  if (!tool || tool.effect !== 'write')
    throw new CompensationRefused(
      `agent '${agent.name}' compensates with '${call.tool}', which is not one of its write tools`,
    );
  const args = agentSafeParse(tool.args, call.args);
  if (!args.success)
    throw new CompensationRefused(
      `agent '${agent.name}' gave arguments '${call.tool}' refuses (${args.error.issues.map((i) => i.path.join('.')).join(', ')})`,
    );
  return { tool, args: args.data };
}

export class Compensations {
  constructor(
    private readonly ctx: EngineContext,
    private readonly ledger: Ledger,
    private readonly runner: LedgerEffectRunner,
  ) {}

  /**
   * Plans the compensation of `original` (in needs_human, or already
   * compensation_required on a repeat), links it, and drives it.
   * Throws LedgerConflict when the original is in any other state.
   */
  async compensate(original: ActionRecord, by: string, evidence: unknown): Promise<CompensationResult> {
    if (original.compensates)
      throw new CompensationRefused(
        `${original.actionId} is itself a compensation: resolve it as confirmed or not_sent`,
      );
    const spec = await this.requireSpec(original.runId);
    let comp: ActionRecord;
    if (original.state === 'needs_human') {
      const { tool, args } = compensationCall(original, spec, this.ctx.agents.get(spec.agent));
      // Plan first (idempotent by identity), then link: a crash between leaves the original in needs_human for a
      // repeat.
      comp = await this.ledger.planCompensation(original, tool.name, args, by, evidence);
      try {
        await this.ledger.transition(
          original.runId,
          original.actionId,
          'needs_human',
          'compensation_required',
          {
            by,
            why: 'operator finding: compensate',
            evidence: { finding: 'compensate', evidence, compensation: comp.actionId },
          },
          { compensatedBy: comp.actionId },
        );
      } catch (err) {
        if (!(err instanceof LedgerConflict && err.actual === 'compensation_required')) throw err; // a concurrent request linked it
      }
    } else if (original.state === 'compensation_required' && original.compensatedBy) {
      const found = await this.ledger.get(original.runId, original.compensatedBy);
      if (!found)
        throw new CompensationRefused(`compensation ${original.compensatedBy} of ${original.actionId} is missing`);
      comp = found;
    } else {
      throw new LedgerConflict('needs_human', original.state);
    }
    return this.drive(comp, spec, by);
  }

  /**
   * Drives a compensation (also after an operator resolved the compensation
   * itself from the human queue) and ends the run once it is confirmed.
   */
  async drive(
    comp: ActionRecord,
    spec: RunSpec,
    by: string,
    driver: CompensationDriver = 'operator',
  ): Promise<CompensationResult> {
    if (comp.state === 'planned') {
      try {
        await this.ledger.transition(comp.runId, comp.actionId, 'planned', 'authorized', {
          by,
          why: 'compensation ordered by an operator',
          evidence: { compensates: comp.compensates },
        });
      } catch (err) {
        if (!(err instanceof LedgerConflict)) throw err;
      }
    }
    let inProgress = false;
    let refusedFor: string | undefined;
    const current = await this.ledger.get(comp.runId, comp.actionId);
    if (current && !SETTLED.has(current.state)) {
      const holder = `operator-api:${process.pid}:${randomUUID()}`;
      if (await this.ledger.lease(comp.runId, comp.actionId, holder, this.ctx.cfg.RECONCILE_DEADLINE_MS + 60_000)) {
        try {
          const toolCtx = {
            runId: comp.runId,
            step: comp.step,
            signal: new AbortController().signal,
            input: spec.input,
          };
          await this.runner.settle(comp.actionId, this.toolOf(spec, comp.tool), comp.args, toolCtx, spec.tenant);
        } catch (err) {
          // Proven not sent but refused for now: left in safe_retry; the reconciler's sweep (or a repeated request)
          // sends it with the same key, and the answer says it is not sent.
          if (!isRetryable(err)) throw err;
          refusedFor = errorCode(err);
        } finally {
          await this.ledger.releaseLease(comp.runId, comp.actionId, holder);
        }
      } else {
        inProgress = true;
      }
    }
    const after = (await this.ledger.get(comp.runId, comp.actionId)) ?? comp;
    const delivered = after.state === 'confirmed' && !deliveryRefused(after);
    const run = delivered ? await this.endRun(after, driver) : await this.runStatus(after.runId, false);
    const atWork = delivered && run.status !== 'missing' && !isTerminal(run.status) && run.status !== 'needs_human';
    if (atWork) this.atWork(after, run.status, driver);
    // The original leaves the human queue only once its run has ended (or is gone, or goes on at work): a crash
    // before this line leaves it there, and the next sweep ends nothing twice and removes it.
    if (delivered && after.compensates && (run.status === 'missing' || isTerminal(run.status) || atWork))
      await this.ledger.leaveHumanQueue(after.runId, after.compensates);
    if (inProgress || SETTLED.has(after.state))
      return { compensation: after, inProgress, run, ...(atWork ? { runAtWork: true as const } : {}) };
    const error = refusedFor ?? 'not_dispatched';
    this.ctx.metrics.compensationsUnsettled.inc({ driver, state: after.state });
    this.ctx.log.warn(
      {
        code: 'compensation_unsettled',
        runId: after.runId,
        actionId: after.actionId,
        state: after.state,
        error,
        driver,
      },
      'compensation not sent: it stays in the human queue and the sweep sends it again',
    );
    return { compensation: after, inProgress, unsettled: { error }, run };
  }

  /**
   * The compensation was delivered while its run was at work (a retry or a resume while it was pending): the run
   * goes on as the operator ordered it, the compensation stands. Named (ids and codes only) and counted.
   */
  private atWork(comp: ActionRecord, status: RunStatus | 'missing', driver: CompensationDriver): void {
    this.ctx.metrics.compensatedRunsAtWork.inc({ driver });
    this.ctx.log.warn(
      {
        code: 'compensated_run_at_work',
        runId: comp.runId,
        actionId: comp.actionId,
        original: comp.compensates,
        status,
        driver,
      },
      'compensation confirmed while its run is at work: the run goes on, the original leaves the human queue',
    );
  }

  private async endRun(comp: ActionRecord, driver: CompensationDriver): Promise<CompensationResult['run']> {
    const reason = `compensated: action ${comp.compensates} compensated by ${comp.actionId} (receipt ${comp.receipt ?? 'none'})`;
    // A quick operator can act while the park's commit is still landing: the operator's drive waits for it, like
    // resumeParked. The sweep does not: it drives originals queued RECONCILER_MIN_AGE_MS ago and more, past any park
    // still landing, so a run at work then is at work (retried or resumed while its compensation was pending), and
    // waiting on it would hold every sweep pass END_SETTLE_MS for nothing.
    const deadline = Date.now() + (driver === 'operator' ? END_SETTLE_MS : 0);
    for (;;) {
      const r = await stopRun(this.ctx, comp.runId, {
        expected: ['needs_human'],
        status: 'failed',
        reason,
        now: Date.now(),
      });
      if (r.stopped || (r.status !== 'running' && r.status !== 'queued') || Date.now() >= deadline)
        return this.runStatus(comp.runId, r.stopped);
      await new Promise((res) => setTimeout(res, POLL_MS));
    }
  }

  private async runStatus(runId: string, ended: boolean): Promise<CompensationResult['run']> {
    const run = await readRun(this.ctx.redis, this.ctx.keys, runId, ['reason']);
    return { status: run?.status ?? 'missing', reason: run?.reason ?? '', ended };
  }

  /** The compensation's write tool, from the run's agent (built with its service's configuration). */
  private toolOf(spec: RunSpec, name: string): WriteTool {
    const tool = this.ctx.agents.get(spec.agent)?.tools.get(name);
    if (!tool || tool.effect !== 'write')
      throw new CompensationRefused(`no write tool '${name}' for agent '${spec.agent}' in this process`);
    return tool;
  }

  async requireSpec(runId: string): Promise<RunSpec> {
    const spec = await this.ctx.store.readSpec(runId);
    if (!spec) throw new CompensationRefused(`run ${runId} is gone`);
    return spec;
  }
}
