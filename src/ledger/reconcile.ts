/**
 * Reconcile before retry: "not found" alone is not "not sent". An action in `outcome_unknown` may have
 * happened. Its tool declares how its service settles a doubt
 * (`service.reconcile`, an ordered list; src/core/tool.ts), and every round
 * tries those methods in order:
 *  - `lookup`: found -> confirmed with its receipt; processing -> wait and ask
 *    again; proven absent AND proven stopped -> safe_retry (same key), unless
 *    the action has used its dispatch attempts; absent alone proves nothing ->
 *    the next method;
 *  - `replay_same_key` (window W from the action's first dispatch, recorded in
 *    its ledger entry): inside W, re-send the identical request with the same
 *    key; the service's answer is the outcome (-> confirmed; a replay is never a
 *    new effect); "same key still in progress" or no answer -> wait and again;
 *    same key with another body -> needs_human (a conflict: stop and surface);
 *    refused outright (a 4xx) -> needs_human, logged and counted as a step's refusal is (tellServiceRejection);
 *    past W -> this method is spent (a re-send could be a second effect);
 *  - once the run's cancel is recorded, for an action driven for the model (`unlessCancelled`: a step's, or the
 *    sweep's of a step's action; never an operator's compensation): no same-key replay, which may be the first
 *    request the service ever sees (the previous owner died after `dispatched`, before its request left). The
 *    cancel is read with the action's state in one script (ledgerReplayGuard-2.lua), at the start and again just
 *    before each replay leaves, as the move to `dispatched` reads it (ledgerTransition-6.lua); the replay is then
 *    spent (logged `replay_cancelled`, counted in `agent_replays_cancelled_total{tool}`): a lookup may still settle
 *    the action (found -> confirmed; absent_stopped -> safe_retry, whose dispatch the cancel refuses: `rejected`),
 *    else it goes to a person with a reason that says the run was cancelled while its outcome was unknown;
 *  - no method at all (`none`), or every method spent -> needs_human at once;
 *    still undecided at the deadline (in a step, never past the run's deadline
 *    plus its margin: `notAfter`) -> needs_human with what was last learned.
 *    Every attempt, the last one included, is given at least `minAttemptMs` (or the
 *    tool's own timeout when shorter): what was last learned is the service's answer.
 * "Not found" alone is never "not sent".
 * Decision record 0011: docs/decisions/0011-not-found-is-not-not-sent.md.
 */
import {
  CancelledError,
  codedDetails,
  hasErrorCode,
  isKeyConflict,
  isOutcomeUnknown,
  isRetryable,
  type AgentError,
} from '../core/errors.js';
import { abortableSleep } from '../core/withRetry.js';
import type { LookupResult, ReconcileMethod, ToolContext, WriteTool } from '../core/tool.js';
import { DeadlineError, withDeadline } from '../core/timeout.js';
import { confirmedOutput } from '../core/toolOutput.js';
import type { Logger } from 'pino';
import type { Metrics } from '../metrics/metrics.js';
import { type Ledger, LedgerConflict, type ActionRecord } from './ledger.js';
import type { EngineContext } from '../runs/engineContext.js';
import { actionReplicated } from '../runs/replication.js';
import { tellServiceRejection } from './serviceRejection.js';

export const MAX_DISPATCH_ATTEMPTS = 3;

export interface ReconcileDeps {
  ledger: Ledger;
  metrics: Metrics;
  /** The action's log (its run and action named): a same-key replay the service refuses is told there. */
  log: Logger;
  deadlineMs: number;
  pollMs: number;
  /**
   * The least time one settle attempt (a lookup, a same-key replay) is given, or its tool's own timeout when shorter
   * (RECONCILE_MIN_ATTEMPT_MS), even when less is left before the deadline (`deadlineMs`, `notAfter`): the last
   * answer a person reads is the service's, never a timeout the clamp made. Overruns the deadline by at most this.
   */
  minAttemptMs: number;
  /**
   * Waits until the action's record in `state` is on the replicas REDIS_MIN_REPLICAS asks for (NotReplicatedError
   * if not): before a same-key replay leaves, as before a dispatch. Absent: no wait.
   */
  replicate?: ReplicateAction;
  /**
   * The action is driven for the model (a step's write, or the sweep's of one): once its run's cancel is recorded,
   * no same-key replay settles it (a lookup may; else a person). Unset for an operator's compensation, which a
   * cancel does not stop (docs/http-api.md, the cancel).
   */
  unlessCancelled?: boolean;
  /** Epoch ms: no lookup or wait past it (a step's run deadline plus DEADLINE_MARGIN_MS); unset for the sweeper. */
  notAfter?: number;
  now?: () => number;
}

export type ReplicateAction = (
  rec: Pick<ActionRecord, 'runId' | 'actionId'>,
  state: 'dispatched' | 'outcome_unknown',
) => Promise<void>;

/** The replication wait of every request an action sends (src/runs/replication.ts). */
export function replicateActions(ctx: Pick<EngineContext, 'redis' | 'keys' | 'cfg' | 'metrics'>): ReplicateAction {
  return (rec, state) => actionReplicated(ctx, rec, state);
}

export type ReconcileOutcome = 'confirmed' | 'safe_retry' | 'needs_human' | 'moved';

/** What one method learned this round. */
type Round =
  | { kind: 'confirmed'; why: string; receipt: string; output: unknown; evidence: unknown; effects?: number }
  | { kind: 'safe_retry' | 'needs_human'; why: string; evidence: unknown }
  /** Undecided for now: ask again after a pause. */
  | { kind: 'wait'; why: string; evidence: unknown }
  /** This method cannot settle the action, now or later (past its window): try the next one. */
  | { kind: 'spent'; why: string; evidence: unknown }
  /** Nothing settled this round, but a later round may: the next method, then wait. */
  | { kind: 'pass'; why: string; evidence: unknown };

/**
 * What a replay round learned, or what its guard found instead of sending: `moved`, the action left outcome_unknown
 * (settled by someone else: nothing to replay or record); `cancelled`, the run's cancel is recorded (not replayed).
 */
type ReplayRound = Round | { kind: 'moved' } | { kind: 'cancelled' };

/**
 * Before a replay of an action driven for the model: `clear` to send, `cancelled` (the run's cancel is recorded:
 * never replayed) or `moved` (no longer outcome_unknown).
 */
type ReplayGuard = () => Promise<'clear' | 'cancelled' | 'moved'>;

export async function reconcile(
  d: ReconcileDeps,
  rec: ActionRecord,
  tool: WriteTool,
  ctx: ToolContext,
  by: string,
): Promise<ReconcileOutcome> {
  const now = d.now ?? Date.now;
  const move = async (
    to: 'confirmed' | 'safe_retry' | 'needs_human',
    why: string,
    evidence: unknown,
    set: Record<string, string> = {},
  ) => {
    try {
      await d.ledger.transition(rec.runId, rec.actionId, 'outcome_unknown', to, { by, why, evidence }, set);
      d.metrics.effects.inc({ tool: rec.tool, state: to });
      return to;
    } catch (err) {
      if (err instanceof LedgerConflict) return 'moved' as const;
      throw err;
    }
  };
  // The run's cancel, once seen (for an action driven for the model): the replay is spent, and a person who gets the
  // action is told the run was cancelled while its outcome was unknown.
  let cancel: string | undefined;
  let withheld = false;
  const guard: ReplayGuard | undefined = d.unlessCancelled
    ? async () => {
        try {
          await d.ledger.replayGuard(rec.runId, rec.actionId);
          return 'clear';
        } catch (err) {
          if (err instanceof LedgerConflict) return 'moved';
          if (!(err instanceof CancelledError)) throw err;
          cancel = cancelReason(err);
          return 'cancelled';
        }
      }
    : undefined;
  /** The replay method spent by the cancel: told once, then the other methods (a lookup) may still settle it. */
  const cancelledReplay = (): Round => {
    if (!withheld) {
      withheld = true;
      d.metrics.replaysCancelled.inc({ tool: rec.tool });
      d.log.warn(
        { code: 'replay_cancelled', cancel },
        "run cancel recorded: the action's outcome is unknown and no same-key replay is sent",
      );
    }
    return {
      kind: 'spent',
      why: `not replayed: the run's cancel is recorded (${cancel}), and a same-key replay may be the first request the service sees`,
      evidence: { cancel, replay: false },
    };
  };
  const toPerson = (why: string, evidence: unknown) =>
    cancel === undefined
      ? move('needs_human', why, evidence)
      : move(
          'needs_human',
          `the run was cancelled while the action's outcome was unknown (${cancel}): no same-key replay after a cancel, a person decides; ${why}`,
          { cancel, ...(isRecord(evidence) ? evidence : { evidence }) },
        );
  if (guard && (await guard()) === 'moved') return 'moved';
  const methods = tool.service.reconcile;
  if (methods.length === 0) {
    return toPerson('the service offers no way to settle a doubt (no lookup, no replay): a person decides', {
      reconcile: 'none',
    });
  }
  const runBound = d.notAfter !== undefined && d.notAfter < now() + d.deadlineMs;
  const deadline = runBound ? d.notAfter! : now() + d.deadlineMs;
  const undecided = runBound
    ? "outcome still undecidable at the run's deadline"
    : `outcome still undecidable after ${d.deadlineMs} ms`;
  // Never less than the minimum attempt, even when the deadline leaves less: a 1 ms lookup learns nothing.
  const timeoutMs = () => Math.min(tool.timeoutMs, Math.max(deadline - now(), d.minAttemptMs));
  /** An attempt of `ms`: in a step, bounded by the run's deadline plus margin, or by the attempt's own end if later. */
  const boundedFor =
    (ms: number): Bounded =>
    (fn) =>
      d.notAfter === undefined ? fn(ctx.signal) : withDeadline(Math.max(d.notAfter, now() + ms), ctx.signal, fn, now);
  const last: Record<string, unknown> = {};
  for (;;) {
    let spent = 0;
    for (const method of methods) {
      let r: Round;
      const ms = timeoutMs();
      try {
        const got: ReplayRound =
          method.kind === 'lookup'
            ? await lookupRound(tool, rec, ctx, boundedFor(ms), ms)
            : cancel !== undefined
              ? cancelledReplay()
              : await replayRound(d, method, tool, rec, ctx, boundedFor(ms), ms, now, guard);
        if (got.kind === 'moved') return 'moved';
        r = got.kind === 'cancelled' ? cancelledReplay() : got;
      } catch (err) {
        if (!(err instanceof DeadlineError)) throw err;
        return toPerson(undecided, { last, deadline: new Date(d.notAfter!).toISOString() });
      }
      last[method.kind] = { why: r.why, evidence: r.evidence };
      if (r.kind === 'confirmed') {
        // The service holds more than one effect for this one action: loud, whatever happens next.
        if (r.effects !== undefined && r.effects > 1) d.metrics.duplicateWrites.inc({ tool: rec.tool }, r.effects - 1);
        const output = JSON.stringify(confirmedOutput(tool, r.receipt, r.output));
        return move('confirmed', r.why, r.evidence, { receipt: r.receipt, output });
      }
      if (r.kind === 'safe_retry') {
        if (rec.attempts >= MAX_DISPATCH_ATTEMPTS)
          return toPerson(`proven not sent, but ${rec.attempts} dispatches already failed`, r.evidence);
        // After a cancel too: the dispatch of a safe_retry is refused by the cancel (ledgerTransition-6.lua), and the
        // action ends `rejected`, never sent.
        return move('safe_retry', r.why, r.evidence);
      }
      if (r.kind === 'needs_human') return toPerson(r.why, r.evidence);
      if (r.kind === 'wait') break;
      if (r.kind === 'spent') spent++;
    }
    if (spent === methods.length) {
      return toPerson(
        Object.values(last)
          .map((x) => (x as { why: string }).why)
          .join('; '),
        last,
      );
    }
    if (now() >= deadline) return toPerson(undecided, last);
    await abortableSleep(Math.min(d.pollMs, Math.max(0, deadline - now())), ctx.signal);
  }
}

type Bounded = <T>(fn: (signal: AbortSignal) => Promise<T>) => Promise<T>;

async function lookupRound(
  tool: WriteTool,
  rec: ActionRecord,
  ctx: ToolContext,
  bounded: Bounded,
  timeoutMs: number,
): Promise<Round> {
  if (!tool.lookup)
    return { kind: 'spent', why: 'the tool declares a lookup but has none', evidence: { lookup: 'missing' } };
  let r: LookupResult;
  try {
    r = await bounded((signal) =>
      tool.lookup!(ctx, {
        actionId: rec.actionId,
        idempotencyKey: rec.idempotencyKey,
        requestId: rec.requestId,
        args: rec.args,
        timeoutMs,
        signal,
      }),
    );
  } catch (err) {
    if (err instanceof DeadlineError) throw err;
    if (ctx.signal.aborted) throw err;
    // The service could not be asked this time (unreachable, 5xx, refused): undecided, ask again.
    return { kind: 'pass', why: 'the lookup failed', evidence: failure(err) };
  }
  switch (r.status) {
    case 'committed':
      return {
        kind: 'confirmed',
        why: 'the service has the request: receipt recovered by lookup',
        receipt: r.receipt,
        output: r.output,
        evidence: r.evidence,
        ...(r.effects !== undefined ? { effects: r.effects } : {}),
      };
    case 'processing':
      return { kind: 'wait', why: 'the service is still processing the request', evidence: r.evidence };
    case 'absent_stopped':
      return { kind: 'safe_retry', why: 'the service proves no effect and no request in flight', evidence: r.evidence };
    case 'absent':
      return { kind: 'pass', why: 'not found by lookup, which alone proves nothing', evidence: r.evidence };
    default:
      return { kind: 'pass', why: 'the lookup could not decide', evidence: r.evidence };
  }
}

/**
 * Re-sends the identical request (the recorded arguments) with the action's key, only while the
 * window recorded at its first dispatch is open for the whole request (its timeout included).
 */
async function replayRound(
  d: Pick<ReconcileDeps, 'replicate' | 'metrics' | 'log'>,
  method: Extract<ReconcileMethod, { kind: 'replay_same_key' }>,
  tool: WriteTool,
  rec: ActionRecord,
  ctx: ToolContext,
  bounded: Bounded,
  timeoutMs: number,
  now: () => number,
  guard?: ReplayGuard,
): Promise<ReplayRound> {
  if (rec.replayUntil === undefined) {
    return {
      kind: 'spent',
      why: 'no key window was recorded at dispatch: a same-key re-send is not known to be safe',
      evidence: { windowMs: method.windowMs },
    };
  }
  if (now() + timeoutMs >= rec.replayUntil) {
    return {
      kind: 'spent',
      why: `the service's key window ended at ${new Date(rec.replayUntil).toISOString()}: a re-send could be a second effect`,
      evidence: { replayUntil: rec.replayUntil },
    };
  }
  // A replay is a request that may create the effect: like a dispatch, it leaves only once a failover cannot make
  // the ledger forget the action (a run re-asked after a lost intent could choose another email, another key).
  const unreplicated = await notReplicated(d, rec);
  if (unreplicated) return unreplicated;
  // Driven for the model: read with the action's state just before it leaves, as the move to `dispatched` reads it.
  // A cancel recorded after this check finds the replay on its way, as it finds a dispatch past its move.
  const guarded = guard ? await guard() : 'clear';
  if (guarded !== 'clear') return { kind: guarded };
  try {
    const receipt = await bounded((signal) =>
      tool.dispatch(rec.args, ctx, {
        actionId: rec.actionId,
        idempotencyKey: rec.idempotencyKey,
        requestId: rec.requestId,
        timeoutMs,
        signal,
      }),
    );
    return {
      kind: 'confirmed',
      why: 'same-key replay inside the key window: the service answered with the outcome',
      receipt: receipt.receipt,
      output: receipt.output,
      evidence: { replay: true, receipt: receipt.receipt, replayed: receipt.replayed },
    };
  } catch (err) {
    if (err instanceof DeadlineError) throw err;
    if (ctx.signal.aborted) throw err;
    if (isKeyConflict(err)) {
      return {
        kind: 'needs_human',
        why: 'conflict: the service holds this key for a different request',
        evidence: failure(err),
      };
    }
    if (isOutcomeUnknown(err) && err.details.reason === 'in_progress') {
      return {
        kind: 'wait',
        why: 'the service is still processing the first request with this key',
        evidence: failure(err),
      };
    }
    if (isOutcomeUnknown(err) || isRetryable(err)) {
      return { kind: 'pass', why: 'the replay got no definite answer', evidence: failure(err) };
    }
    if (hasErrorCode(err, 'invalid_input')) {
      // Refused outright (a 4xx): told as a step's refusal is, so a 401/403 here alerts like one there.
      tellServiceRejection(d, tool.name, err.details, 'the service refused the same-key replay: a person decides');
      return { kind: 'needs_human', why: 'the service refused the same-key replay', evidence: failure(err) };
    }
    throw err;
  }
}

/** The cancel's reason a refused replay guard carries (the run's cancelReason), or the operator's cancel. */
function cancelReason(err: CancelledError): string {
  const reason = err.details.cancelReason;
  return typeof reason === 'string' && reason !== '' ? reason : 'cancelled_by_operator';
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** An error as evidence: its code, message and coded details (codes and statuses, never bodies: codedDetails). */
function failure(err: unknown): Record<string, unknown> {
  const e = err as AgentError;
  return { error: e?.code ?? 'error', message: e?.message, ...codedDetails(e?.details ?? {}) };
}

/** A `pass` when the action's record is not on enough replicas yet (the next round asks again), else undefined. */
async function notReplicated(d: Pick<ReconcileDeps, 'replicate'>, rec: ActionRecord): Promise<Round | undefined> {
  if (!d.replicate) return undefined;
  try {
    await d.replicate(rec, 'outcome_unknown');
    return undefined;
  } catch (err) {
    if (!hasErrorCode(err, 'not_replicated')) throw err;
    return { kind: 'pass', why: 'not replayed: the action is not on enough replicas', evidence: { replicated: false } };
  }
}
