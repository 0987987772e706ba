/**
 * The effect ledger in Redis: one hash per action (in the run's hash tag), an
 * append-only history list of transitions with evidence, the SET NX
 * reservation of the idempotency key, and per-shard indexes of open actions
 * and of the human queue. Every move is one compare-and-set script.
 */
import type { EngineContext } from '../runs/engineContext.js';
import { AgentError } from '../core/errors.js';
import type { RedisClient } from '../store/connect.js';
import type { KeySpace } from '../store/keys.js';
import { approvalDecide } from '../store/calls/approvalDecide.js';
import { ledgerPlan } from '../store/calls/ledgerPlan.js';
import { ledgerTransition } from '../store/calls/ledgerTransition.js';
import { ledgerAccept } from '../store/calls/ledgerAccept.js';
import { ledgerReplayGuard } from '../store/calls/ledgerReplayGuard.js';
import { leaveHumanQueue } from '../store/calls/leaveHumanQueue.js';
import { retentionAtEnd } from '../store/archiveQueue.js';
import { compensationIdentity, type ActionIdentity } from './identity.js';
import type { LedgerState } from './states.js';
import { readRun } from '../store/runRecord.js';
import { readHistory } from '../store/ledgerHistory.js';

export interface Evidence {
  by: string;
  why: string;
  evidence?: unknown;
}

export interface HistoryEntry extends Evidence {
  from: LedgerState | null;
  to: LedgerState;
  at: number;
}

export interface ActionRecord {
  actionId: string;
  runId: string;
  step: number;
  callId: string;
  tool: string;
  state: LedgerState;
  idempotencyKey: string;
  requestId: string;
  fingerprint: string;
  args: unknown;
  receipt?: string;
  output?: unknown;
  /** Set on a compensating action: the action it undoes. */
  compensates?: string;
  /** Set on an action in compensation_required: its compensating action. */
  compensatedBy?: string;
  /**
   * Set on a `confirmed` action the service refused outright (4xx: bad credentials, invalid request): a definite
   * outcome with no effect, which the model is told as `rejected`, never as done.
   */
  outcome?: 'rejected_by_service';
  /** Set once a park asked for approval of it: when that approval expires (ms). */
  approvalExpiresAt?: number;
  /**
   * Set at the first dispatch of a tool whose service replays a same-key request inside a window
   * (`replay_same_key`): until when (epoch ms) re-sending it with this key cannot be a second effect.
   */
  replayUntil?: number;
  attempts: number;
  repeats: number;
  createdAt: number;
  updatedAt: number;
}

/**
 * `actionId`: the action the call has. It is the one asked for, unless the same call of the step's journalled decision
 * (step and call id) planned an action before under another id: its tool's `identity` changed in between (a deploy, a
 * version continue), and the call gets the action it already has, with its idempotency key, never a second one.
 */
export type PlanResult = {
  status: 'new' | 'existing' | 'repeat';
  state: LedgerState;
  repeats: number;
  actionId: string;
};

/**
 * A compare-and-set found the entry in another state: someone else moved it (the delivery fails; its retry reads the
 * new state).
 */
export class LedgerConflict extends AgentError {
  constructor(
    readonly expected: LedgerState,
    readonly actual: string,
  ) {
    super('ledger_conflict', `ledger entry is '${actual}', expected '${expected}'`, { expected, actual });
  }
}

export class Ledger {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: KeySpace,
    private readonly now: () => number = Date.now,
    /** Cap of the run's event stream, where every move is also published as an `effect` event. */
    private readonly eventsMaxLen = 1000,
    /**
     * The run's retention at its end (retentionAtEnd): a run that ended while an action waited for a person has no
     * TTL (includes/expireRun.lua); the move that ends its last wait lets it go with this. Undefined: never here.
     */
    private readonly retentionMs?: number,
  ) {}

  private k(runId: string, actionId: string) {
    const shard = this.keys.shardOf(runId);
    const action = this.keys.action(runId, actionId);
    return {
      action,
      history: this.keys.actionHistory(action),
      open: this.keys.openActions(shard),
      human: this.keys.humanQueue(shard),
      events: this.keys.run(runId).events,
    };
  }

  /**
   * Looks the action up, or plans it. `decision`: the digest of the journalled decision that asked for it
   * (entryDigest); the plan is refused (FenceError `decision_not_journalled`, nothing written) where the run's journal
   * does not hold that decision as the step's, so no effect leaves for a decision a failover took back. Omitted for
   * an action no step decided (an operator's compensation).
   */
  async plan(
    runId: string,
    step: number,
    callId: string,
    tool: string,
    id: ActionIdentity,
    args: unknown,
    by: string,
    decision?: string,
  ): Promise<PlanResult> {
    const k = this.k(runId, id.actionId);
    const now = this.now();
    const fields = {
      actionId: id.actionId,
      runId,
      step: String(step),
      callId,
      tool,
      idempotencyKey: id.idempotencyKey,
      requestId: id.requestId,
      fingerprint: id.fingerprint,
      args: JSON.stringify(args),
      createdAt: String(now),
      updatedAt: String(now),
    };
    const history: HistoryEntry = {
      from: null,
      to: 'planned',
      at: now,
      by,
      why: 'tool call requested by the model',
      evidence: { step, callId },
    };
    const res = await ledgerPlan(
      this.redis,
      {
        ...k,
        reservation: this.keys.reservation(runId, id.idempotencyKey),
        runActions: this.keys.run(runId).actions,
        run: this.keys.run(runId).run,
        journal: this.keys.run(runId).journal,
      },
      {
        actionId: id.actionId,
        fields,
        history,
        step,
        callId,
        eventsMaxLen: this.eventsMaxLen,
        event: effectEvent(id.actionId, tool, null, 'planned', step),
        decision,
      },
    );
    return { status: res.status, state: res.state as LedgerState, repeats: res.repeats, actionId: res.actionId };
  }

  /**
   * Compare-and-set move. Throws LedgerConflict (with the actual state) when another party moved first.
   * `countAttempt`: the move is a dispatch attempt. `unlessCancelled`: refuse the move, in the same
   * script, when the run's cancel is recorded (CancelledError, with the cancel's reason): a dispatch on
   * the model's behalf never follows a cancel, however close the two are.
   */
  async transition(
    runId: string,
    actionId: string,
    from: LedgerState,
    to: LedgerState,
    ev: Evidence,
    set: Record<string, string> = {},
    opts: { countAttempt?: boolean; unlessCancelled?: boolean } = {},
  ): Promise<void> {
    const k = this.k(runId, actionId);
    const now = this.now();
    const history: HistoryEntry = { from, to, at: now, ...ev };
    const res = await ledgerTransition(
      this.redis,
      {
        action: k.action,
        history: k.history,
        openActions: k.open,
        humanQueue: k.human,
        events: k.events,
        run: this.keys.run(runId).run,
      },
      {
        actionId,
        from,
        to,
        now,
        history,
        set,
        countAttempt: opts.countAttempt === true,
        eventsMaxLen: this.eventsMaxLen,
        event: effectEvent(actionId, undefined, from, to, undefined),
        unlessCancelled: opts.unlessCancelled === true,
        retentionMs: this.retentionMs,
      },
    );
    if (!res.moved) throw new LedgerConflict(from, res.actual);
  }

  /**
   * The guard of a same-key replay of an action driven for the model (src/ledger/reconcile.ts), in one script
   * (ledgerReplayGuard-2.lua) as the move to `dispatched` checks its `unlessCancelled`: throws CancelledError (with
   * the cancel's reason) once the run's cancel is recorded, and LedgerConflict when the action is no longer
   * `outcome_unknown` (settled meanwhile: nothing to replay). Writes nothing.
   */
  async replayGuard(runId: string, actionId: string): Promise<void> {
    const k = this.k(runId, actionId);
    const res = await ledgerReplayGuard(
      this.redis,
      { action: k.action, run: this.keys.run(runId).run },
      { actionId, expected: 'outcome_unknown' },
    );
    if (!res.clear) throw new LedgerConflict('outcome_unknown', res.actual);
  }

  async get(runId: string, actionId: string): Promise<ActionRecord | undefined> {
    const h = await this.redis.hgetall(this.k(runId, actionId).action);
    return h.state ? toRecord(h) : undefined;
  }

  /** Every move, oldest first: those folded into the record once the run ended, then the list's (ledgerHistory.ts). */
  async history(runId: string, actionId: string): Promise<HistoryEntry[]> {
    const k = this.k(runId, actionId);
    const raw = await readHistory(this.redis, k.action, k.history);
    return raw.map((r) => JSON.parse(r) as HistoryEntry);
  }

  /**
   * The action one call of a step (its step and call id) planned, or undefined. A run's actions are few (one a write
   * call), and this is read only for a journalled call whose arguments the tool refuses today.
   */
  async plannedByCall(runId: string, step: number, callId: string): Promise<ActionRecord | undefined> {
    if (callId === '') return undefined;
    const keys = await this.redis.smembers(this.keys.run(runId).actions);
    // Every record's call read at once (one write of commands), not one round trip after another.
    const calls = await Promise.all(keys.map((key) => this.redis.hmget(key, 'step', 'callId', 'state')));
    const at = calls.findIndex(([s, c, state]) => s === String(step) && c === callId && state);
    if (at < 0) return undefined;
    const h = await this.redis.hgetall(keys[at]!);
    return h.state ? toRecord(h) : undefined;
  }

  async listForRun(runId: string): Promise<(ActionRecord & { history: HistoryEntry[] })[]> {
    const actionKeys = await this.redis.smembers(this.keys.run(runId).actions);
    const out: (ActionRecord & { history: HistoryEntry[] })[] = [];
    for (const key of actionKeys) {
      const h = await this.redis.hgetall(key);
      if (!h.state) continue;
      const rec = toRecord(h);
      out.push({ ...rec, history: await this.history(runId, rec.actionId) });
    }
    return out.sort((a, b) => a.step - b.step || a.createdAt - b.createdAt);
  }

  /** Action ids in a shard index (open actions or the human queue) older than maxScore, oldest first from `offset`. */
  async indexed(
    zsetKey: string,
    maxScore: number,
    limit = 100,
    offset = 0,
  ): Promise<{ actionId: string; since: number }[]> {
    const raw = await this.redis.zrangebyscore(zsetKey, '-inf', maxScore, 'WITHSCORES', 'LIMIT', offset, limit);
    const out: { actionId: string; since: number }[] = [];
    for (let i = 0; i < raw.length; i += 2) out.push({ actionId: raw[i]!, since: Number(raw[i + 1]) });
    return out;
  }

  /**
   * Visits the entries of a shard index due by `maxScore`, oldest first, `pageSize` at a time from offset `from`. An
   * entry still due after its visit (left where it is: a live owner, a failure, nothing to do yet) is paged past, so
   * however many stay at the head they never starve the ones behind; one its visit moved (re-scored past maxScore) or
   * removed leaves the window. Stops after `pages` pages: the offset to resume from, or undefined when it read to the
   * end. A visit that throws ends the walk: each caller catches its own.
   */
  async walkDue(
    zsetKey: string,
    maxScore: number,
    visit: (actionId: string) => Promise<void>,
    opts: { from?: number; pages?: number; pageSize?: number } = {},
  ): Promise<number | undefined> {
    const pageSize = opts.pageSize ?? 100;
    const pages = opts.pages ?? Infinity;
    let offset = opts.from ?? 0;
    for (let page = 0; page < pages; page++) {
      const due = await this.indexed(zsetKey, maxScore, pageSize, offset);
      for (const { actionId } of due) {
        await visit(actionId);
        const score = await this.redis.zscore(zsetKey, actionId);
        if (score !== null && Number(score) <= maxScore) offset++;
      }
      if (due.length < pageSize) return undefined;
    }
    return offset;
  }

  async getInShard(shard: number, actionId: string): Promise<ActionRecord | undefined> {
    const h = await this.redis.hgetall(this.keys.actionInShard(shard, actionId));
    return h.state ? toRecord(h) : undefined;
  }

  /** The run that owns an action id, searching every shard (operator routes know only the action id). */
  async locate(actionId: string): Promise<ActionRecord | undefined> {
    for (const shard of this.keys.allShards()) {
      const rec = await this.getInShard(shard, actionId);
      if (rec) return rec;
    }
    return undefined;
  }

  /**
   * Claims a pending approval in one script (src/store/lua/approvalDecide-4.lua).
   * `fingerprint` '' is the expiry sweep (no check, reason given by the caller).
   */
  async decideApproval(
    runId: string,
    actionId: string,
    decision: 'approve' | 'reject',
    fingerprint: string,
    by: string,
    why: string,
  ): Promise<
    | { outcome: 'decided' | 'already_decided' | 'expired' | 'void'; decision: ApprovalDecision }
    | { outcome: 'fingerprint_mismatch' }
  > {
    const k = this.k(runId, actionId);
    const res = await approvalDecide(
      this.redis,
      {
        action: k.action,
        history: k.history,
        approvals: this.keys.approvals(this.keys.shardOf(runId)),
        run: this.keys.run(runId).run,
      },
      { actionId, decision, fingerprint, by, now: this.now(), why },
    );
    if (res.outcome === 'fingerprint_mismatch') return res;
    if (res.outcome === 'conflict') throw new LedgerConflict('planned', res.state);
    return { outcome: res.outcome, decision: parseDecision(res.decision) };
  }

  /** The approval decision stored on the record, if any. */
  async approvalDecision(runId: string, actionId: string): Promise<ApprovalDecision | undefined> {
    const raw = await this.redis.hget(this.k(runId, actionId).action, 'decision');
    return raw ? parseDecision(raw) : undefined;
  }

  /**
   * Plans the compensating action of `original` (same run, same step): a write
   * of a registered tool (`tool`, `args`), linked by its `compensates` field
   * (the original's `compensatedBy` is set when it moves to
   * compensation_required). Its action id, idempotency key and request id
   * derive from the original's action id, so a second request (a repeated
   * operator POST) plans nothing new and finds this one. It starts `planned`.
   */
  async planCompensation(
    original: ActionRecord,
    tool: string,
    args: unknown,
    by: string,
    evidence: unknown,
  ): Promise<ActionRecord> {
    const { actionId, idempotencyKey, requestId, fingerprint } = compensationIdentity(
      original.runId,
      original.actionId,
      args,
    );
    const k = this.k(original.runId, actionId);
    const now = this.now();
    const fields = {
      actionId,
      runId: original.runId,
      step: String(original.step),
      callId: `compensate:${original.callId}`,
      tool,
      idempotencyKey,
      requestId,
      fingerprint,
      args: JSON.stringify(args),
      compensates: original.actionId,
      createdAt: String(now),
      updatedAt: String(now),
    };
    const history: HistoryEntry = {
      from: null,
      to: 'planned',
      at: now,
      by,
      why: `compensation of ${original.actionId}`,
      evidence,
    };
    await ledgerPlan(
      this.redis,
      {
        ...k,
        reservation: this.keys.reservation(original.runId, idempotencyKey),
        runActions: this.keys.run(original.runId).actions,
        run: this.keys.run(original.runId).run,
        journal: this.keys.run(original.runId).journal,
      },
      {
        actionId,
        fields,
        history,
        step: original.step,
        callId: fields.callId,
        eventsMaxLen: this.eventsMaxLen,
        event: effectEvent(actionId, fields.tool, null, 'planned', original.step),
      },
    );
    const rec = await this.get(original.runId, actionId);
    if (!rec) throw new AgentError('action_missing', 'no ledger entry for this action', { actionId });
    return rec;
  }

  /**
   * A short lease on driving one action from outside a step job (an operator's
   * compensation): an efficiency guard so two concurrent requests do not both
   * take the action for abandoned. Correctness never rests on it: every move is
   * a compare-and-set and the service enforces the idempotency key (a release
   * racing the lease's expiry costs at most one lookup).
   */
  async lease(runId: string, actionId: string, holder: string, ms: number): Promise<boolean> {
    return (await this.redis.set(this.keys.actionLease(runId, actionId), holder, 'PX', ms, 'NX')) === 'OK';
  }

  /**
   * Whether the action has a live owner, which a sweeper must leave alone. The
   * owner of a compensation is whoever holds its lease (an operator's request,
   * compensation.ts); the owner of any other action is the run's CURRENT step
   * job (run.jobId: `<runId>.s<step>`, or `<runId>.s<step>.r<n>` once resumed
   * after a park), the only job that may drive the run's actions, alive while
   * it holds its BullMQ lock. Never derived from the action's step: a resumed
   * step, or a later step repeating the write, runs under another job id.
   */
  async ownerAlive(rec: Pick<ActionRecord, 'runId' | 'actionId' | 'compensates'>): Promise<boolean> {
    if (rec.compensates) return (await this.redis.exists(this.keys.actionLease(rec.runId, rec.actionId))) === 1;
    const jobId = (await readRun(this.redis, this.keys, rec.runId, ['jobId']))?.jobId;
    if (!jobId) return false;
    return (await this.redis.exists(this.keys.jobLock(this.keys.shardOf(rec.runId), jobId))) === 1;
  }

  /**
   * Takes a compensated original out of the human queue. ledgerTransition-6.lua keeps an original in
   * compensation_required there until its compensation has ended the run (compensation.ts calls this then), so a
   * compensation that does not finish stays in front of a person and in the reconciler's sweep. An ended run held for
   * a person while it waited is let go with its retention then, once nothing else of it waits (leaveHumanQueue-2.lua).
   */
  async leaveHumanQueue(runId: string, actionId: string): Promise<void> {
    await leaveHumanQueue(
      this.redis,
      { humanQueue: this.k(runId, actionId).human, run: this.keys.run(runId).run },
      { actionId, retentionMs: this.retentionMs },
    );
  }

  /**
   * A person's finding `accept` on an original whose compensation settled without delivering: recorded in its history
   * (compensation_required to itself: the state is terminal) and the original out of the human queue, in one script
   * (ledgerAccept-3.lua). `not_queued`: it had left the queue (accepted before), nothing written. Throws
   * LedgerConflict when it is not compensation_required with that compensation.
   */
  async accept(
    runId: string,
    actionId: string,
    compensation: string,
    ev: Evidence,
  ): Promise<'recorded' | 'not_queued'> {
    const k = this.k(runId, actionId);
    const now = this.now();
    const history: HistoryEntry = { from: 'compensation_required', to: 'compensation_required', at: now, ...ev };
    const res = await ledgerAccept(
      this.redis,
      { action: k.action, history: k.history, humanQueue: k.human },
      { actionId, compensation, history, retentionMs: this.retentionMs, now },
    );
    if (res.outcome === 'conflict') throw new LedgerConflict('compensation_required', res.actual);
    return res.outcome;
  }

  /** Whether the action is in its shard's human queue. */
  async inHumanQueue(runId: string, actionId: string): Promise<boolean> {
    return (await this.redis.zscore(this.k(runId, actionId).human, actionId)) !== null;
  }

  async releaseLease(runId: string, actionId: string, holder: string): Promise<void> {
    const key = this.keys.actionLease(runId, actionId);
    if ((await this.redis.get(key)) === holder) await this.redis.del(key);
  }
}

/** An `effect` event on the run's stream: ids and states only, never arguments. */
function effectEvent(
  actionId: string,
  tool: string | undefined,
  from: LedgerState | null,
  to: LedgerState,
  step: number | undefined,
): string {
  return JSON.stringify({ actionId, ...(tool ? { tool } : {}), from, to, ...(step !== undefined ? { step } : {}) });
}

/** The process's ledger: its Redis, key space and event-stream cap (every production caller's ledger). */
export function ledgerFor(ctx: Pick<EngineContext, 'redis' | 'keys' | 'cfg'>, now: () => number = Date.now): Ledger {
  return new Ledger(ctx.redis, ctx.keys, now, ctx.cfg.EVENTS_MAX_LEN, retentionAtEnd(ctx.cfg));
}

export interface ApprovalDecision {
  actionId: string;
  runId: string;
  decision: 'approve' | 'reject';
  state: 'authorized' | 'rejected';
  approver: string;
  reason: string;
  fingerprint: string;
  decidedAt: number;
}

function parseDecision(raw: string): ApprovalDecision {
  const d = JSON.parse(raw) as ApprovalDecision & { decidedAt: string | number };
  return { ...d, decidedAt: Number(d.decidedAt) };
}

function toRecord(h: Record<string, string>): ActionRecord {
  return {
    actionId: h.actionId!,
    runId: h.runId!,
    step: Number(h.step),
    callId: h.callId ?? '',
    tool: h.tool!,
    state: h.state as LedgerState,
    idempotencyKey: h.idempotencyKey!,
    requestId: h.requestId!,
    fingerprint: h.fingerprint!,
    args: h.args ? JSON.parse(h.args) : undefined,
    ...(h.receipt ? { receipt: h.receipt } : {}),
    ...(h.output ? { output: JSON.parse(h.output) } : {}),
    ...(h.compensates ? { compensates: h.compensates } : {}),
    ...(h.compensatedBy ? { compensatedBy: h.compensatedBy } : {}),
    ...(h.outcome === 'rejected_by_service' ? { outcome: h.outcome } : {}),
    ...(h.approvalExpiresAt ? { approvalExpiresAt: Number(h.approvalExpiresAt) } : {}),
    ...(h.replayUntil ? { replayUntil: Number(h.replayUntil) } : {}),
    attempts: Number(h.attempts ?? 0),
    repeats: Number(h.repeats ?? 0),
    createdAt: Number(h.createdAt),
    updatedAt: Number(h.updatedAt),
  };
}
