/**
 * The effect runner: every write tool call goes through the ledger.
 *
 * Check, then record, by a deterministic identity (DBOS-style): look the action
 * up by id; a confirmed one returns its recorded outcome (no second effect); a
 * planned/authorized/safe_retry one is dispatched with its one idempotency key;
 * a dispatched one found on recovery, or one whose response was lost, is
 * reconciled with the service, never resent blindly.
 *
 * What leaves is what the ledger recorded (the record's args), and one action is
 * driven once per process at a time: the same action asked for twice in one
 * step waits for the first call and is answered from it (`deduplicated`).
 *
 * If the process dies: before `dispatched` -> the next owner dispatches (the
 * service would dedupe by key anyway); after `dispatched` -> the next owner or
 * the reconciler finds it dispatched and queries the service first.
 *
 * Once the run's cancel is recorded nothing more is sent for the model: the move to `dispatched` refuses (the
 * action ends `rejected`), and an action whose outcome is unknown is not settled by a same-key replay (a lookup may
 * settle it, else it goes to a person). An operator's compensation (`settle`) is not stopped by a cancel.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { EngineContext } from '../runs/engineContext.js';
import {
  AgentError,
  CancelledError,
  hasErrorCode,
  isKeyConflict,
  isOutcomeUnknown,
  isRetryable,
  ShutdownError,
  type KeyConflictError,
  codedDetails,
} from '../core/errors.js';
import { DeadlineError } from '../core/timeout.js';
import { confirmedOutput } from '../core/toolOutput.js';
import { withRetry } from '../core/withRetry.js';
import type { DispatchReceipt, ToolContext, WriteTool } from '../core/tool.js';
import type { Metrics } from '../metrics/metrics.js';
import { traced } from '../metrics/tracing.js';
import type { Tracer } from '@opentelemetry/api';
import { testHooksFrom, type CrashPoints } from '../config/testHooks.js';
import type { EffectRequest, EffectResult, EffectRunner } from '../worker/effects.js';
import { actionIdentity } from './identity.js';
import { type Ledger, LedgerConflict, ledgerFor, type ActionRecord } from './ledger.js';
import {
  MAX_DISPATCH_ATTEMPTS,
  reconcile,
  replicateActions,
  type ReconcileDeps,
  type ReplicateAction,
} from './reconcile.js';
import { tellServiceRejection } from './serviceRejection.js';
import { NotReplicatedError } from '../store/replicated.js';
import type { LedgerState } from './states.js';

/** Decides whether an action needs a person's approval before dispatch (see src/ledger/approvals.ts). */
export interface ApprovalPolicy {
  requiresApproval(tenant: string, tool: WriteTool, args: unknown): boolean;
}

/**
 * What the effect runner reads of the configuration, and nothing else (the
 * process's Config has every field; defaults are in src/config/config.ts).
 */
export interface RunnerOptions {
  /** The same write requested this many extra times in one run parks it for a person (needs_human, loop_detected). */
  readonly LOOP_REPEAT_LIMIT: number;
  /** How long a still-processing request is queried before it goes to a person, and how often, in ms. */
  readonly RECONCILE_DEADLINE_MS: number;
  readonly RECONCILE_POLL_MS: number;
  /** The least time one settle attempt or dispatch is given (or the tool's timeout when shorter), in ms. */
  readonly RECONCILE_MIN_ATTEMPT_MS: number;
  /** How far past the run's deadline the lookups that settle a write cut off by it may still wait, in ms. */
  readonly DEADLINE_MARGIN_MS: number;
  /** Backoff of a refused dispatch (nothing left the process), in ms. */
  readonly RETRY_BASE_MS: number;
  readonly RETRY_MAX_MS: number;
}

export interface RunnerDeps {
  cfg: RunnerOptions;
  ledger: Ledger;
  metrics: Metrics;
  log: Logger;
  crash: CrashPoints;
  /** Test hook (src/config/testHooks.ts), the chaos campaign's negative control: no ledger, a blind send every time. */
  unsafeDisableIdempotency?: boolean;
  /** One `agent.effect` span per write tool call, a child of the step's span. */
  tracer?: Tracer | undefined;
  workerId: string;
  approvals?: ApprovalPolicy;
  /**
   * Waits until the run's writes so far (the decision, the action's plan and intent) are on the replicas
   * REDIS_MIN_REPLICAS asks for, or throws NotReplicatedError (src/runs/replication.ts). Absent: no wait.
   */
  replicate?: ReplicateAction;
}

const MAX_DRIVE_ROUNDS = 12;

/** An effect request as the ledger reads it: of the tool call, only its id (callers outside a step pass no more). */
export type LedgerEffectRequest = Omit<EffectRequest, 'call'> & { call: Pick<EffectRequest['call'], 'id'> };

export class LedgerEffectRunner implements EffectRunner {
  /**
   * The actions this process is driving now, by run and action id. Two identical write calls in one step (the model
   * asked for the same action twice in one turn: one identity, one action id) run side by side: the second waits for
   * the first's drive and is answered from it, `deduplicated`, instead of reading the first's `dispatched` as an
   * owner that died.
   */
  private readonly inFlight = new Map<string, Promise<EffectResult>>();

  constructor(private readonly d: RunnerDeps) {}

  async run(input: LedgerEffectRequest): Promise<EffectResult> {
    return this.traced(input, () => this.runEffect(input));
  }

  /**
   * The action this call (the run's step and call id) planned before, driven as `run` drives it; undefined when it
   * planned none. For a journalled call whose arguments today's tool refuses (its schema changed since the call was
   * planned): a write that may have left is settled with its service, under its key and with the arguments it was
   * recorded with, not reported to the model as a format error it could answer with a second write.
   */
  async resume(input: Omit<LedgerEffectRequest, 'args'>): Promise<EffectResult | undefined> {
    const { ctx, call, tool } = input;
    if (this.d.unsafeDisableIdempotency) return undefined;
    const rec = await this.d.ledger.plannedByCall(ctx.runId, ctx.step, call.id);
    if (!rec) return undefined;
    this.d.log.warn(
      { code: 'arguments_refused_planned', runId: ctx.runId, step: ctx.step, tool: tool.name, actionId: rec.actionId },
      'the tool refuses the arguments this call planned its action with: that action is driven',
    );
    const request = { ...input, args: rec.args };
    return this.traced(request, () => this.driveOnce(rec.actionId, request, false));
  }

  /**
   * The settled outcome (confirmed, rejected) of the action this call (the run's step and call id) planned; undefined
   * when it planned none or its action is not settled. For a journalled call whose tool is gone (an operator's
   * continue under a version without it): nothing is sent, and the model is told what its write came to.
   */
  async settledFor(runId: string, step: number, callId: string, tool: string): Promise<EffectResult | undefined> {
    const rec = await this.d.ledger.plannedByCall(runId, step, callId);
    return rec?.tool === tool ? settledResult(rec, false) : undefined;
  }

  private traced(input: LedgerEffectRequest, work: () => Promise<EffectResult>): Promise<EffectResult> {
    return traced(
      this.d.tracer,
      {
        name: 'agent.effect',
        parent: input.ctx.trace,
        attributes: () => ({
          'agent.run_id': input.ctx.runId,
          'agent.step': input.ctx.step,
          'agent.tool': input.tool.name,
        }),
        outcome: async (r: EffectResult) => {
          const state = (await this.d.ledger.get(input.ctx.runId, r.actionId))?.state;
          return {
            'agent.action_id': r.actionId,
            'agent.result': r.status,
            ...(state ? { 'agent.ledger_state': state } : {}),
          };
        },
      },
      work,
    );
  }

  /** The effect itself (see the module comment); `run` traces it. */
  private async runEffect(input: LedgerEffectRequest): Promise<EffectResult> {
    const { tool, args, call, ctx } = input;
    if (this.d.unsafeDisableIdempotency) return this.unsafeDispatch(tool, args, ctx);
    const id = actionIdentity(ctx.runId, tool, args);
    const plan = await this.d.ledger.plan(
      ctx.runId,
      ctx.step,
      call.id,
      tool.name,
      id,
      args,
      this.d.workerId,
      input.decision,
    );
    if (plan.status === 'new') this.d.metrics.effects.inc({ tool: tool.name, state: 'planned' });
    const { actionId } = plan;
    if (actionId !== id.actionId) {
      // The tool's identity changed since this call planned its action (a deploy or a version continue between two
      // deliveries of the step): the call keeps the action it has, and its key; no second request is made.
      this.d.log.warn(
        {
          code: 'identity_changed',
          runId: ctx.runId,
          step: ctx.step,
          tool: tool.name,
          actionId,
          computed: id.actionId,
        },
        'the call planned its action under another id: that action is driven',
      );
    }
    this.d.crash.hit('after_reservation', ctx.step);
    let repeat = false;
    if (plan.status === 'repeat') {
      // The same write asked for again in this run (the agent looping): answer from the ledger.
      repeat = true;
      this.d.metrics.dedupeHits.inc({ tool: tool.name });
      if (plan.repeats >= this.d.cfg.LOOP_REPEAT_LIMIT) {
        this.d.metrics.loopStops.inc();
        return {
          kind: 'park',
          status: 'needs_human',
          reason: `loop_detected: ${tool.name} requested ${plan.repeats + 1} times`,
          actionId,
        };
      }
    }
    return this.driveOnce(actionId, input, repeat);
  }

  /** Drives the action; a second call of this process for the same action waits for the first's drive. */
  private async driveOnce(actionId: string, input: LedgerEffectRequest, repeat: boolean): Promise<EffectResult> {
    const { tool, args, ctx } = input;
    const key = `${ctx.runId}\u0000${actionId}`;
    const driving = this.inFlight.get(key);
    if (driving) {
      // Another call of this step is driving the action now: one send, and this call is told it was deduplicated.
      const first = await driving;
      return first.kind === 'observed' && first.status === 'ok' ? { ...first, status: 'deduplicated' } : first;
    }
    const drive = this.drive(actionId, tool, args, ctx, input.tenant, repeat, false, input.deadlineAt);
    this.inFlight.set(key, drive);
    try {
      return await drive;
    } finally {
      this.inFlight.delete(key);
    }
  }

  /**
   * Drives an action planned outside a step (an operator's compensation,
   * src/ledger/compensation.ts) to a settled state, exactly as a step would:
   * dispatched before the request leaves, reconciled by lookup when the answer
   * is lost. The caller must hold the action's lease (Ledger.lease): like a
   * step's lock, it is what lets a `dispatched` record be taken for abandoned.
   * An operator's order is not a model's: a cancel request does not stop it (its dispatch, and a same-key replay
   * that settles it, go ahead).
   */
  async settle(
    actionId: string,
    tool: WriteTool,
    args: unknown,
    ctx: ToolContext,
    tenant: string,
  ): Promise<EffectResult> {
    return this.drive(actionId, tool, args, ctx, tenant, false, true);
  }

  /** @param deadlineAt the run's deadline, for a step's action (an operator's order has none). */
  private async drive(
    actionId: string,
    tool: WriteTool,
    args: unknown,
    ctx: ToolContext,
    tenant: string,
    repeat: boolean,
    operatorOrdered: boolean,
    deadlineAt?: number,
  ): Promise<EffectResult> {
    const log = this.d.log.child({ runId: ctx.runId, step: ctx.step, actionId, tool: tool.name });
    for (let round = 0; round < MAX_DRIVE_ROUNDS; round++) {
      const rec = await this.d.ledger.get(ctx.runId, actionId);
      if (!rec) throw new AgentError('action_missing', `ledger entry ${actionId} vanished`);
      if (rec.tool !== tool.name) {
        return {
          kind: 'park',
          status: 'needs_human',
          reason: `determinism: action ${actionId} was ${rec.tool}, now ${tool.name}`,
          actionId,
        };
      }
      switch (rec.state) {
        case 'confirmed':
        case 'rejected':
          return settledResult(rec, repeat)!;
        case 'planned':
          if (this.d.approvals?.requiresApproval(tenant, tool, args)) {
            // The step's park records the approval request (expiry + approvals index) in the
            // same commit (commitStep): no approval is pending, or can expire, before the run parks.
            return {
              kind: 'park',
              status: 'waiting_approval',
              reason: `approval_required: ${tool.name}`,
              actionId: rec.actionId,
            };
          }
          await this.move(rec, 'planned', 'authorized', { why: 'no approval required by policy' });
          break;
        case 'authorized':
        case 'safe_retry':
          try {
            // A model's dispatch is refused by the move itself once the run's cancel is recorded.
            await this.dispatch(rec, tool, ctx, log, !operatorOrdered, deadlineAt);
          } catch (err) {
            if (!(err instanceof CancelledError)) throw err;
            return this.notDispatched(rec, err, log);
          }
          break;
        case 'dispatched':
          // We hold the step's lock and no other call of this process drives it (inFlight), so whoever dispatched it
          // is gone: the request may have left.
          await this.move(rec, 'dispatched', 'outcome_unknown', {
            why: 'found dispatched on recovery: the previous owner died',
          });
          break;
        case 'outcome_unknown': {
          // A model's action is not settled by a same-key replay once the run's cancel is recorded (the replay may
          // be the first request the service sees): a lookup may settle it, else a person (src/ledger/reconcile.ts).
          const deps = this.reconcileDeps(log, !operatorOrdered, deadlineAt);
          const r = await reconcile(deps, rec, tool, ctx, this.d.workerId);
          log.info({ code: `reconciled_${r}` }, 'reconciled');
          break;
        }
        case 'needs_human':
        case 'compensation_required':
          return {
            kind: 'park',
            status: 'needs_human',
            reason: `needs_human: ${tool.name} action ${rec.actionId} is ${rec.state}`,
            actionId: rec.actionId,
          };
      }
    }
    return {
      kind: 'park',
      status: 'needs_human',
      reason: `needs_human: ${tool.name} action ${actionId} did not settle`,
      actionId,
    };
  }

  /**
   * Reconciling a step's action waits at most until the run's deadline plus DEADLINE_MARGIN_MS.
   * @param unlessCancelled no same-key replay once the run's cancel is recorded (an action driven for the model).
   */
  private reconcileDeps(log: Logger, unlessCancelled: boolean, deadlineAt?: number): ReconcileDeps {
    return {
      unlessCancelled,
      ledger: this.d.ledger,
      metrics: this.d.metrics,
      log,
      deadlineMs: this.d.cfg.RECONCILE_DEADLINE_MS,
      pollMs: this.d.cfg.RECONCILE_POLL_MS,
      minAttemptMs: this.d.cfg.RECONCILE_MIN_ATTEMPT_MS,
      ...(this.d.replicate ? { replicate: this.d.replicate } : {}),
      ...(deadlineAt !== undefined ? { notAfter: deadlineAt + this.d.cfg.DEADLINE_MARGIN_MS } : {}),
    };
  }

  /**
   * The run's cancel refused the dispatch: nothing was sent, and nothing will be. The action
   * ends `rejected` with the cancel as evidence; the model sees the refusal and the step's
   * commit ends the run `cancelled` (commitStep: a recorded cancel wins over any status).
   */
  private async notDispatched(rec: ActionRecord, err: CancelledError, log: Logger): Promise<EffectResult> {
    const cancel =
      typeof err.details.cancelReason === 'string' && err.details.cancelReason !== ''
        ? err.details.cancelReason
        : 'cancelled_by_operator';
    const output = { rejected: true, reason: 'cancelled_by_operator', cancel };
    log.info({ code: 'dispatch_cancelled', cancel }, 'run cancel recorded: not dispatching');
    await this.move(
      rec,
      rec.state,
      'rejected',
      { why: "not dispatched: the run's cancel is recorded", evidence: { cancel } },
      { output: JSON.stringify(output) },
    );
    return { kind: 'observed', status: 'rejected', output, actionId: rec.actionId };
  }

  /** CAS move; a lost race is fine (the drive loop re-reads the state). */
  private async move(
    rec: ActionRecord,
    from: LedgerState,
    to: LedgerState,
    ev: { why: string; evidence?: unknown },
    set: Record<string, string> = {},
    opts: { countAttempt?: boolean; unlessCancelled?: boolean } = {},
  ): Promise<boolean> {
    try {
      await this.d.ledger.transition(rec.runId, rec.actionId, from, to, { by: this.d.workerId, ...ev }, set, opts);
      this.d.metrics.effects.inc({ tool: rec.tool, state: to });
      return true;
    } catch (err) {
      if (err instanceof LedgerConflict) return false;
      throw err;
    }
  }

  /**
   * Intent, request, outcome: the action is marked dispatched (from here on a crash means "maybe sent"), the request
   * leaves with the action's key, and its answer is recorded; an answer that is not definite is settled with the
   * service before anything is resent.
   * @param unlessCancelled refuse (CancelledError, nothing sent) when the run's cancel is recorded.
   * @param deadlineAt the run's wall-clock deadline: nothing is sent past it, no request waits past it.
   */
  private async dispatch(
    rec: ActionRecord,
    tool: WriteTool,
    ctx: ToolContext,
    log: Logger,
    unlessCancelled: boolean,
    deadlineAt?: number,
  ): Promise<void> {
    // Past the run's deadline nothing is sent: the action stays as it is, the step stops on the wall clock.
    if (deadlineAt !== undefined && Date.now() >= deadlineAt) throw new DeadlineError(deadlineAt);
    const window = this.replayWindow(rec, tool);
    const intent = { why: 'dispatching', evidence: { attempt: rec.attempts + 1 } };
    if (!(await this.move(rec, rec.state, 'dispatched', intent, window, { countAttempt: true, unlessCancelled })))
      return;
    await this.untilReplicated(rec, log);
    this.d.crash.hit('after_dispatched', ctx.step);
    let receipt: DispatchReceipt;
    try {
      // What the ledger recorded is what is sent: a later call with the same identity (a repeat, a redelivery)
      // may carry other arguments, but the key and the record are this action's.
      receipt = await this.send(rec, tool, rec.args, ctx, log, deadlineAt);
    } catch (caught) {
      return this.settleRefusal(caught, rec, tool, ctx, log);
    }
    this.d.crash.hit('after_call', ctx.step);
    await this.recordReceipt(rec, tool, receipt, log);
    this.d.crash.hit('after_outcome', ctx.step);
  }

  /**
   * The service's key window starts with the first request that carries the key: recorded once, before it leaves
   * (so the window we count ends no later than the service's), and never moved by a later dispatch.
   */
  private replayWindow(rec: ActionRecord, tool: WriteTool): Record<string, string> {
    const windowMs = replayWindowMs(tool);
    return windowMs !== undefined && rec.replayUntil === undefined
      ? { replayUntil: String(Date.now() + windowMs) }
      : {};
  }

  /**
   * The request, retried only where the service cannot have processed it; none starts past the deadline, and each
   * waits at most to the deadline or RECONCILE_MIN_ATTEMPT_MS, whichever is later.
   */
  private send(
    rec: ActionRecord,
    tool: WriteTool,
    args: unknown,
    ctx: ToolContext,
    log: Logger,
    deadlineAt: number | undefined,
  ): Promise<DispatchReceipt> {
    const now = Date.now;
    // A request started before the deadline gets at least the minimum attempt (or the tool's own timeout): cut to
    // what the deadline leaves, it would time out on its own and make the doubt reconcile has to settle.
    const floor = this.d.cfg.RECONCILE_MIN_ATTEMPT_MS;
    const timeoutMs = () =>
      deadlineAt === undefined ? tool.timeoutMs : Math.min(tool.timeoutMs, Math.max(deadlineAt - now(), floor));
    const request = () =>
      tool.dispatch(args, ctx, {
        actionId: rec.actionId,
        idempotencyKey: rec.idempotencyKey,
        requestId: rec.requestId,
        timeoutMs: timeoutMs(),
        signal: ctx.signal,
      });
    return withRetry({ maxAttempts: 4, baseMs: this.d.cfg.RETRY_BASE_MS, maxMs: this.d.cfg.RETRY_MAX_MS }, request, {
      signal: ctx.signal,
      ...(deadlineAt !== undefined ? { deadlineAt, now } : {}),
      onRetry: (attempt, err) =>
        log.warn({ code: 'dispatch_retry', attempt, err }, 'dispatch retried before it was processed'),
    });
  }

  /** A request that did not come back confirmed: settled by what its error says, never blindly resent. */
  private async settleRefusal(
    caught: unknown,
    rec: ActionRecord,
    tool: WriteTool,
    ctx: ToolContext,
    log: Logger,
  ): Promise<void> {
    // The deadline cut the retries short: handled as the refusal it followed, then the step stops.
    const err = caught instanceof DeadlineError && isRetryable(caught.cause) ? caught.cause : caught;
    const sent = { ...rec, state: 'dispatched' as const };
    if (isRetryable(err)) return this.neverSent(sent, err, caught, ctx, log);
    if (isOutcomeUnknown(err)) {
      // The request may have been processed (timeout, reset, 5xx, malformed): the service is asked before
      // anything is resent.
      await this.move(sent, 'dispatched', 'outcome_unknown', {
        why: 'no definite answer from the service',
        evidence: { error: (err as Error).message, ...codedDetails(err.details) },
      });
      if (ctx.signal.aborted) throw new ShutdownError({ cause: caught });
      return;
    }
    if (isKeyConflict(err)) return this.keyConflict(sent, err, log);
    if (hasErrorCode(err, 'invalid_input')) {
      // The service refused the request outright: a definite outcome with no effect. The ledger's moves from
      // `dispatched` are confirmed or outcome_unknown only, so it is recorded confirmed with the refusal as its
      // outcome (the drive loop answers it `rejected`). Named and counted by HTTP status (tellServiceRejection).
      const refusal = codedDetails(err.details);
      const output = JSON.stringify({ rejected: true, ...refusal });
      const why = { why: 'the service rejected the request', evidence: refusal };
      tellServiceRejection(
        { metrics: this.d.metrics, log },
        tool.name,
        err.details,
        'the service refused the request: no effect',
      );
      await this.move(sent, 'dispatched', 'confirmed', why, { outcome: 'rejected_by_service', output });
      return;
    }
    throw err;
  }

  /**
   * Every attempt failed before its request left (a RetryableError is only ever that: no connection made, a
   * transport closed before the request was written, a 429 or 503 answered before processing; withRetry stops at
   * the first error that is not): nothing reached the service, so there is nothing to reconcile. The action goes
   * to safe_retry (the same key next time) and the step's attempt fails, so the job backs off and sends it again,
   * never the model; past MAX_DISPATCH_ATTEMPTS dispatches, a person decides.
   */
  private async neverSent(
    sent: ActionRecord,
    err: AgentError,
    caught: unknown,
    ctx: ToolContext,
    log: Logger,
  ): Promise<void> {
    const evidence = { error: err.message, ...codedDetails(err.details) };
    await this.move(sent, 'dispatched', 'outcome_unknown', {
      why: 'not sent: every attempt failed before it left',
      evidence,
    });
    const unknown = { ...sent, state: 'outcome_unknown' as const, attempts: sent.attempts + 1 };
    if (unknown.attempts >= MAX_DISPATCH_ATTEMPTS) {
      const why = `proven not sent, but ${unknown.attempts} dispatches already failed`;
      await this.move(unknown, 'outcome_unknown', 'needs_human', { why, evidence });
      return;
    }
    await this.move(unknown, 'outcome_unknown', 'safe_retry', {
      why: 'not sent: a retry with the same key is safe',
      evidence,
    });
    log.warn(
      { code: 'dispatch_not_sent', attempts: unknown.attempts },
      'no attempt reached the service: retried later',
    );
    if (ctx.signal.aborted) throw new ShutdownError({ cause: caught });
    // Retried later in code (the job backs off), never in the model's context; past the run's deadline
    // (a DeadlineError carrying this refusal), not at all: the step stops on the wall clock.
    throw caught;
  }

  /** Same key, another request at the service: never a retry. Stop and surface it to a person. */
  private async keyConflict(sent: ActionRecord, err: KeyConflictError, log: Logger): Promise<void> {
    const evidence = { error: err.message, ...codedDetails(err.details) };
    await this.move(sent, 'dispatched', 'outcome_unknown', { why: 'the service refused: key conflict', evidence });
    await this.move({ ...sent, state: 'outcome_unknown' }, 'outcome_unknown', 'needs_human', {
      why: 'conflict: the service holds this idempotency key for a different request',
      evidence,
    });
    log.warn(
      { code: 'idempotency_conflict', ...codedDetails(err.details) },
      'the service holds this key for a different request',
    );
  }

  /**
   * The service's answer recorded: confirmed, from dispatched or (after a reconciler's move) outcome_unknown or
   * needs_human; in any other state it is logged and counted (agent_late_receipts_total{outcome="unrecorded"}).
   */
  private async recordReceipt(
    rec: ActionRecord,
    tool: WriteTool,
    receipt: DispatchReceipt,
    log: Logger,
  ): Promise<void> {
    if (receipt.replayed && rec.attempts === 0) {
      // The service's replay marker on a first dispatch: it already had this key, so another dispatch of
      // this action reached it that the ledger did not record (a lost ledger write, a second sender).
      // The service deduplicated it; the ledger's own record did not: count it and alert.
      this.d.metrics.duplicateWrites.inc({ tool: tool.name });
      log.warn({ code: 'replayed_key', receipt: receipt.receipt }, 'service replayed an earlier request with this key');
    }
    const output = confirmedOutput(tool, receipt.receipt, receipt.output);
    if (output !== receipt.output)
      log.warn({ code: 'tool_output_too_large', ...(output as object) }, 'write tool output past its cap: not kept');
    const set = { receipt: receipt.receipt, output: JSON.stringify(output) };
    const evidence = { receipt: receipt.receipt, replayed: receipt.replayed };
    const confirmed = { why: 'service confirmed', evidence };
    if (await this.move({ ...rec, state: 'dispatched' }, 'dispatched', 'confirmed', confirmed, set)) return;
    // A reconciler moved it to outcome_unknown meanwhile: our answer settles it.
    const late = { why: 'service confirmed (late response)', evidence };
    if (await this.move({ ...rec, state: 'outcome_unknown' }, 'outcome_unknown', 'confirmed', late, set)) return;
    // Or on to a person (a lookup that could not decide before its deadline): the service's answer is the truth a
    // person would have looked for, so it settles the item (needs_human -> confirmed).
    const toPerson = { why: 'service confirmed (late response, after it went to a person)', evidence };
    if (await this.move({ ...rec, state: 'needs_human' }, 'needs_human', 'confirmed', toPerson, set)) {
      this.d.metrics.lateReceipts.inc({ tool: tool.name, outcome: 'recorded' });
      log.warn(
        { code: 'late_receipt_recorded', receipt: receipt.receipt },
        'late answer settled an action with a person',
      );
      return;
    }
    // Settled otherwise meanwhile (a person's finding, a lookup's): the ledger keeps that, and the answer it could not
    // record is named and counted, never dropped unseen.
    const state = (await this.d.ledger.get(rec.runId, rec.actionId))?.state ?? 'missing';
    if (state === 'confirmed') return;
    this.d.metrics.lateReceipts.inc({ tool: tool.name, outcome: 'unrecorded' });
    log.error(
      { code: 'late_receipt_unrecorded', state, receipt: receipt.receipt },
      'the service confirmed an action the ledger holds in another state: receipt not recorded',
    );
  }

  /**
   * Nothing leaves the process that a failover could make the ledger forget: the intent just recorded, and with
   * it the decision that chose the action, must be on the replicas first. If they are not, the request is not
   * sent: the action goes to safe_retry (proven unsent, the same key next time) and NotReplicatedError tells the
   * step to wait (its job is delayed). If this process dies before that move, the next owner finds `dispatched`
   * and reconciles with the service, as after any crash past the intent.
   */
  private async untilReplicated(rec: ActionRecord, log: Logger): Promise<void> {
    if (!this.d.replicate) return;
    try {
      await this.d.replicate(rec, 'dispatched');
    } catch (err) {
      if (!(err instanceof NotReplicatedError)) throw err;
      const evidence = { acked: err.acked, required: err.required };
      log.warn({ code: 'not_replicated', ...evidence }, 'intent not on enough replicas: not dispatched');
      const why = 'not sent: the intent was not on enough replicas';
      await this.move({ ...rec, state: 'dispatched' }, 'dispatched', 'outcome_unknown', { why, evidence });
      await this.move({ ...rec, state: 'outcome_unknown' }, 'outcome_unknown', 'safe_retry', { why, evidence });
      throw err;
    }
  }

  /**
   * Negative control only (test hook unsafeDisableIdempotency): no ledger, a blind send of the
   * action's key every time. Against a key-ignoring service, every redelivery duplicates.
   */
  private async unsafeDispatch(tool: WriteTool, args: unknown, ctx: ToolContext): Promise<EffectResult> {
    const id = actionIdentity(ctx.runId, tool, args);
    const key = `unsafe:${randomUUID()}`;
    try {
      const r = await tool.dispatch(args, ctx, {
        actionId: id.actionId,
        idempotencyKey: id.idempotencyKey,
        requestId: key,
        timeoutMs: tool.timeoutMs,
        signal: ctx.signal,
      });
      return { kind: 'observed', status: 'ok', output: r.output, actionId: key };
    } catch (err) {
      return { kind: 'observed', status: 'tool_error', output: { error: (err as Error).message }, actionId: key };
    }
  }
}

/** The longest same-key replay window the tool's service declares, if any. */
function replayWindowMs(tool: WriteTool): number | undefined {
  const windows = tool.service.reconcile.flatMap((m) => (m.kind === 'replay_same_key' ? [m.windowMs] : []));
  return windows.length === 0 ? undefined : Math.max(...windows);
}

export function createEffectRunner(
  ctx: EngineContext,
  opts: { approvals?: ApprovalPolicy; workerId?: string; crash?: CrashPoints; metrics?: Metrics } = {},
): LedgerEffectRunner {
  const hooks = testHooksFrom(ctx.cfg);
  return new LedgerEffectRunner({
    cfg: ctx.cfg,
    ledger: ledgerFor(ctx),
    metrics: opts.metrics ?? ctx.metrics,
    log: ctx.log,
    crash: opts.crash ?? hooks.crash,
    unsafeDisableIdempotency: hooks.unsafeDisableIdempotency,
    workerId: opts.workerId ?? `worker:${process.pid}`,
    tracer: ctx.tracing.tracer,
    ...(opts.approvals ? { approvals: opts.approvals } : {}),
    ...(ctx.cfg.REDIS_MIN_REPLICAS > 0 ? { replicate: replicateActions(ctx) } : {}),
  });
}

/** What a settled action (confirmed, rejected) answers its call; undefined for one not settled. */
function settledResult(rec: ActionRecord, repeat: boolean): EffectResult | undefined {
  if (rec.state === 'rejected')
    return { kind: 'observed', status: 'rejected', output: rec.output ?? { rejected: true }, actionId: rec.actionId };
  if (rec.state !== 'confirmed') return undefined;
  // A service's refusal is settled (nothing to send again) but is no success: the model is told so.
  if (rec.outcome === 'rejected_by_service')
    return { kind: 'observed', status: 'rejected', output: rec.output, actionId: rec.actionId };
  return { kind: 'observed', status: repeat ? 'deduplicated' : 'ok', output: rec.output, actionId: rec.actionId };
}
