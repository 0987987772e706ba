/**
 * Compensation, executed: an operator's finding `compensate` on an action in
 * the human queue.
 *
 * The compensating action is a clarification email to the customer, whatever
 * the original tool was (an email that may have gone out wrong, a follow-up
 * ticket opened in error, a refund whose outcome is unclear): the services
 * the agent writes to offer no cancel, and what the customer is owed is a
 * correct account of what happened. It is an ordinary `send_email` action in
 * the effect ledger, with its own action id, idempotency key and request id
 * derived from the original's action id (Ledger.planCompensation), linked both
 * ways (`compensates` on it, `compensatedBy` on the original), and it moves
 * planned -> authorized (by the operator) -> dispatched -> confirmed, sent to
 * the service over HTTP with that key, exactly like a step's write. The
 * original's history is kept and ends with needs_human -> compensation_required.
 *
 * The run then ENDS: `failed`, reason `compensated: ...` (a person has taken
 * the ticket over; the agent does not continue after a compensated effect).
 * While the compensation is not confirmed, the run stays `needs_human`.
 *
 * Repeating the request is safe and is how a stuck compensation is finished:
 * planning finds the same action, a confirmed one is never sent again, and a
 * `dispatched` one is looked up at the service before anything is resent.
 * If the process dies: after planning, before the link -> the original is
 * still needs_human, a repeat links it; after `dispatched` -> the reconciler
 * sweeps it by lookup (it is a registered tool), or a repeat does; after
 * `confirmed`, before the run ends -> a repeat ends it.
 */
import { randomUUID } from 'node:crypto';
import type { AppContext } from '../bin/context.js';
import type { WriteTool } from '../core/tool.js';
import { RetryableError, TerminalError } from '../core/errors.js';
import { Ledger, LedgerConflict, type ActionRecord } from './ledger.js';
import type { LedgerEffectRunner } from './runner.js';
import type { LedgerState } from './states.js';
import { runInput, type RunSpec } from '../producer/schemas.js';
import { stopRun } from '../runs/stop.js';

/** States in which driving the compensation further is pointless: a person or nothing is next. */
const SETTLED: ReadonlySet<LedgerState> = new Set(['confirmed', 'rejected', 'needs_human', 'compensation_required']);
const END_SETTLE_MS = 3000;
const POLL_MS = 50;

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
  run: { status: string; reason: string; ended: boolean };
}

const clip = (s: string, n: number) => (s.length <= n ? s : `${s.slice(0, n - 1)}…`);

/** The clarification email that compensates `original` (a send_email action through `email`, the registry's send_email tool). */
export function clarificationEmail(original: ActionRecord, spec: RunSpec, email: WriteTool): { tool: WriteTool; args: unknown } {
  const a = (original.args ?? {}) as { to?: unknown; orderId?: unknown };
  const to = original.tool === 'send_email' && typeof a.to === 'string' ? a.to : spec.ticket.customer.email;
  const about = `your request "${clip(spec.ticket.subject, 200)}"`;
  const what: Record<string, string> = {
    send_email: `An email we sent you about ${about} may have been incomplete or sent in error. Please disregard it.`,
    create_ticket: `A follow-up ticket about ${about} was opened in error and has been withdrawn.`,
    refund: `The refund${typeof a.orderId === 'string' ? ` for order ${clip(a.orderId, 100)}` : ''} discussed in ${about} is under review: please do not rely on an earlier confirmation until we write again.`,
  };
  const body = `Hello ${spec.ticket.customer.name},\n\n${(Object.hasOwn(what, original.tool) ? what[original.tool] : undefined) ?? `An automated action about ${about} needs a correction.`}\nA member of our team is following up with you personally.\n`;
  const args = email.args.parse({ to, template: `compensation:${original.actionId}`, subject: clip(`Correction: ${spec.ticket.subject}`, 500), body });
  return { tool: email, args };
}

export class Compensations {
  constructor(private readonly ctx: AppContext, private readonly ledger: Ledger, private readonly runner: LedgerEffectRunner) {}

  /**
   * Plans the compensation of `original` (in needs_human, or already
   * compensation_required on a repeat), links it, and drives it.
   * Throws LedgerConflict when the original is in any other state.
   */
  async compensate(original: ActionRecord, by: string, evidence: unknown): Promise<CompensationResult> {
    if (original.compensates) throw new CompensationRefused(`${original.actionId} is itself a compensation: resolve it as confirmed or not_sent`);
    const spec = await this.requireSpec(original.runId);
    let comp: ActionRecord;
    if (original.state === 'needs_human') {
      const { tool, args } = clarificationEmail(original, spec, this.emailTool());
      // Plan first (idempotent by identity), then link: a crash between leaves the original in needs_human for a repeat.
      comp = await this.ledger.planCompensation(original, tool.name, args, by, evidence);
      try {
        await this.ledger.transition(original.runId, original.actionId, 'needs_human', 'compensation_required', {
          by, why: 'operator finding: compensate', evidence: { finding: 'compensate', evidence, compensation: comp.actionId },
        }, { compensatedBy: comp.actionId });
      } catch (err) {
        if (!(err instanceof LedgerConflict && err.actual === 'compensation_required')) throw err; // a concurrent request linked it
      }
    } else if (original.state === 'compensation_required' && original.compensatedBy) {
      const found = await this.ledger.get(original.runId, original.compensatedBy);
      if (!found) throw new CompensationRefused(`compensation ${original.compensatedBy} of ${original.actionId} is missing`);
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
  async drive(comp: ActionRecord, spec: RunSpec, by: string): Promise<CompensationResult> {
    if (comp.state === 'planned') {
      try {
        await this.ledger.transition(comp.runId, comp.actionId, 'planned', 'authorized', { by, why: 'compensation ordered by an operator', evidence: { compensates: comp.compensates } });
      } catch (err) {
        if (!(err instanceof LedgerConflict)) throw err;
      }
    }
    let inProgress = false;
    const current = await this.ledger.get(comp.runId, comp.actionId);
    if (current && !SETTLED.has(current.state)) {
      const holder = `operator-api:${process.pid}:${randomUUID()}`;
      if (await this.ledger.lease(comp.runId, comp.actionId, holder, this.ctx.cfg.RECONCILE_DEADLINE_MS + 60_000)) {
        try {
          const toolCtx = { runId: comp.runId, step: comp.step, signal: new AbortController().signal, input: runInput(spec) };
          await this.runner.settle(comp.actionId, this.emailTool(), comp.args, toolCtx, spec.tenant);
        } catch (err) {
          // Proven not sent but refused for now: left in safe_retry, a repeated request sends it with the same key.
          if (!(err instanceof RetryableError)) throw err;
        } finally {
          await this.ledger.releaseLease(comp.runId, comp.actionId, holder);
        }
      } else {
        inProgress = true;
      }
    }
    const after = (await this.ledger.get(comp.runId, comp.actionId)) ?? comp;
    const delivered = after.state === 'confirmed' && !(after.output as { rejected?: boolean } | undefined)?.rejected;
    const run = delivered ? await this.endRun(after) : await this.runStatus(after.runId, false);
    return { compensation: after, inProgress, run };
  }

  private async endRun(comp: ActionRecord): Promise<CompensationResult['run']> {
    const reason = `compensated: action ${comp.compensates} compensated by ${comp.actionId} (receipt ${comp.receipt ?? 'none'})`;
    const deadline = Date.now() + END_SETTLE_MS;
    for (;;) {
      // A quick operator can act while the park's commit is still landing: wait for it, like resumeParked.
      const r = await stopRun(this.ctx, comp.runId, { expected: ['needs_human'], status: 'failed', reason, now: Date.now() });
      if (r.stopped || (r.status !== 'running' && r.status !== 'queued') || Date.now() >= deadline) return this.runStatus(comp.runId, r.stopped);
      await new Promise((res) => setTimeout(res, POLL_MS));
    }
  }

  private async runStatus(runId: string, ended: boolean): Promise<CompensationResult['run']> {
    const [status, reason] = (await this.ctx.redis.hmget(this.ctx.keys.run(runId).run, 'status', 'reason')) as (string | null)[];
    return { status: status ?? '', reason: reason ?? '', ended };
  }

  /** The registry's send_email tool (built with its service's configuration). */
  private emailTool(): WriteTool {
    const tool = this.ctx.registry.get('send_email');
    if (!tool || tool.effect !== 'write') throw new CompensationRefused('no send_email tool is registered');
    return tool;
  }

  async requireSpec(runId: string): Promise<RunSpec> {
    const spec = await this.ctx.store.readSpec(runId);
    if (!spec) throw new CompensationRefused(`run ${runId} is gone`);
    return spec;
  }
}
