/**
 * Agents that call agents: an agent tool's call (defineAgentTool) starts a child run and parks its parent
 * `waiting_child` until the child ends. The parts that live on the run's side:
 *
 *  - the child's identity: its intake event derives from the parent's run, step and call (childEventOf), so a
 *    step redelivered before its commit finds the same child (createRun's idempotency) instead of starting another;
 *  - the tree: the parent's `children` set (added before the child is created, so a child never exists unlisted)
 *    and the child's spec `parent`;
 *  - the hand-off: the parent's `handoffs` hash maps a digest of (parent run, agent tool, identifying arguments) to
 *    the child that hand-off started, written with the listing; the same hand-off asked again in the run finds that
 *    child (earlier) and is answered from it instead of starting another. Child run ids keep deriving from the
 *    parent's run, step and call, so a child started before this record existed keeps its id;
 *  - the outcome the parent's wake reads from the child's run hash (status, reason, final answer, spend);
 *  - the parent's wake job promoted when its children ended (by the last child's commit, a cancel, or the stuck-run
 *    sweep when those were lost: late, never lost). A step may start several children (agent-tool calls in one
 *    turn): the parent waits for all of them, each with a share of its budget (carveLimits).
 *
 * BullMQ's flows (parent/child job dependencies) do not fit: a step is a chain of jobs each committed by our own
 * scripts, and a parked parent has no job at all while it waits (its wake job is added after the park), so there
 * is no parent job for a flow to hold in `waiting-children`. The child's end is read from its run, the source of truth.
 */
import { createHash } from 'node:crypto';
import { canonicalJson, sha256Hex } from '../core/canonical.js';
import type { RedisClient } from '../store/connect.js';
import type { KeySpace } from '../store/keys.js';
import { decodeEntry } from '../core/journal.js';
import type { ChildBudget } from '../core/tool.js';
import { promoteIfDelayed, type ShardQueues } from '../store/queues.js';
import { endsRun, isTerminal, type RunStatus } from '../core/status.js';
import { parseWait, type WaitRecord } from './waits.js';
import type { RunSpec } from './spec.js';
import { readBudget, readRun } from '../store/runRecord.js';
import { readJournal } from '../store/runJournal.js';
import { takeChildOutcome, type TakeReply } from '../store/calls/takeChildOutcome.js';

export type { TakeReply } from '../store/calls/takeChildOutcome.js';

/** A child run to start: the parent that asks, the agent and input, and limits already carved out of the parent's. */
export interface ChildStartRequest {
  parent: { runId: string; step: number; callId: string; tenant: string; deadlineAt: number };
  agent: string;
  input: unknown;
  limits: { maxSteps: number; maxTokens: number; deadlineAt: number; maxCost?: number };
  now: number;
  /** The hand-off's digest (handoffDigestOf), recorded on the parent with the child; absent: the tool opted out. */
  handoff?: string;
}

export type ChildStart =
  | { kind: 'started'; runId: string; created: boolean }
  /** Nothing written: the agent is not run here, or the input does not pass its schema (fields named). */
  | { kind: 'refused'; error: 'unknown_agent' | 'invalid_input'; fields: { path: string; message: string }[] }
  /** This process was given no starter (a worker built without the producer's intake). */
  | { kind: 'refused'; error: 'unavailable' };

/** A hand-off to look up on its parent before a child is started for it. */
export interface HandoffLookup {
  parent: ChildStartRequest['parent'];
  agent: string;
  input: unknown;
  /** handoffDigestOf the call. */
  handoff: string;
}

/** Starts child runs through the intake (src/producer/childRuns.ts; given to the worker by the composition root). */
export interface ChildRunStarter {
  start(req: ChildStartRequest): Promise<ChildStart>;
  /**
   * The child an earlier call of the same hand-off started in the parent's run, or undefined: none, or the child is
   * this call's own (a step redelivered after it listed its child, or a child listed before hand-offs were recorded).
   */
  earlier(req: HandoffLookup): Promise<string | undefined>;
}

/** What the parent's wake reads of its child: its status, and what it spent so far. */
export interface ChildOutcome {
  /** Terminal, or handed to a person: the parent's wait is over. */
  ended: boolean;
  status: RunStatus;
  reason: string;
  /** The child's final answer, when it completed. */
  answer?: string;
  steps: number;
  tokens: number;
  /** µ$ (absent: nothing recorded). */
  cost?: number;
  /** The child's ledger actions, oldest first (at most CHILD_ACTIONS_LISTED): what it did, or may have done. */
  actions: ChildAction[];
  /** How many actions the child has beyond those listed. */
  moreActions?: number;
}

/**
 * One of a child's ledger actions as its parent's model is told it: the tool, the ledger state (`confirmed`,
 * `needs_human`, `outcome_unknown`...) and, once confirmed, the service's receipt when it is an id. Ids only: never
 * the action's arguments or output (a customer's text).
 */
export interface ChildAction {
  tool: string;
  state: string;
  actionId: string;
  /** The service refused it outright (`confirmed` with no effect). */
  outcome?: 'rejected_by_service';
  receipt?: string;
}

/** The most actions of a child listed to its parent's model. */
export const CHILD_ACTIONS_LISTED = 20;

/** A receipt told to a model: a service's record id (re_..., tkt_...), never free text. */
const RECEIPT_ID = /^[A-Za-z0-9_.:-]{1,128}$/;

/** The intake event of a parent's call: one child per (parent run, step, call), whatever the redeliveries. */
export function childEventOf(parentRunId: string, step: number, callId: string): string {
  const digest = createHash('sha256').update(`${parentRunId}\u0000${step}\u0000${callId}`).digest('hex');
  return `child:${digest.slice(0, 32)}`;
}

/**
 * The digest naming a hand-off in its parent's run: sha256 of the canonical JSON (RFC 8785) of the run, the agent
 * tool and its identifying arguments, as a write's action identity is derived (src/ledger/identity.ts). The same
 * hand-off asked again in the run has the same digest, whatever the step or call.
 */
export function handoffDigestOf(parentRunId: string, tool: string, identity: unknown): string {
  return sha256Hex(canonicalJson({ runId: parentRunId, tool, identity }));
}

/**
 * One child's limits: what the call asks, never more than its share of what the parent has left, so that the
 * `share` children a step starts together can never spend more than the parent has (each gets at most 1/share of
 * it). Steps: the parent's left after the step that asks (which is counted at its commit); tokens: the parent's left
 * now; deadline: the parent's at the latest. Undefined when the parent has no step or token left to give.
 */
export function carveLimits(
  parent: { maxSteps: number; maxTokens: number; deadlineAt: number; maxCost?: number | undefined },
  used: { steps: number; tokens: number; cost?: number | undefined },
  asked: ChildBudget | undefined,
  now: number,
  share = 1,
): ChildStartRequest['limits'] | undefined {
  const stepsLeft = Math.floor((parent.maxSteps - used.steps - 1) / share);
  const tokensLeft = Math.floor((parent.maxTokens - used.tokens) / share);
  const maxSteps = Math.min(stepsLeft, asked?.maxSteps ?? Infinity);
  const maxTokens = Math.min(tokensLeft, asked?.maxTokens ?? Infinity);
  const deadlineAt = Math.min(parent.deadlineAt, now + (asked?.maxWallMs ?? Infinity));
  if (!(maxSteps >= 1 && maxTokens >= 1 && deadlineAt > now)) return undefined;
  const carved = {
    maxSteps: Math.floor(maxSteps),
    maxTokens: Math.floor(maxTokens),
    deadlineAt: Math.floor(deadlineAt),
  };
  // Money, like tokens: a share of what the parent has left (a parent without a money budget gives none).
  if (!parent.maxCost) return carved;
  const maxCost = Math.floor(Math.min((parent.maxCost - (used.cost ?? 0)) / share, asked?.maxCost ?? Infinity));
  return maxCost >= 1 ? { ...carved, maxCost } : undefined;
}

/** What a child reads of its parent to know whether the parent still takes its outcome. */
export interface ParentStanding {
  status: RunStatus;
  cursor: number;
  wait: WaitRecord | undefined;
}

/**
 * Whether a parent has moved on from its child (started by the parent's step `child.step`): it ended, it is gone, or
 * it took the child's outcome and no longer waits on it. A parent takes a child's outcome once, at its wake (it marks
 * the child, takeChildOutcome-1.lua, then wakeRun-5.lua journals the outcome and charges what the child had spent by
 * then), and only while the child counts as ended (terminal, or `needs_human`) or at the parent's deadline. Whatever
 * the child spends after that is charged to nobody and answers nobody: a child whose parent moved on is never put
 * back to work (a retry, a resume after a person's decision, a version continue are refused) and ends `cancelled` /
 * `parent_moved_on` at its next step.
 *
 * Not moved on: the parent is `waiting_child` on this child at that step (its wake has not taken the outcome yet), or
 * the step that started the child has not committed yet (cursor at or before it: the parent is still in that step,
 * or parked mid-step for a person, and parks on the child when the step commits).
 */
export function parentMovedOn(parent: ParentStanding | undefined, child: { runId: string; step: number }): boolean {
  if (!parent || isTerminal(parent.status)) return true;
  const w = parent.wait;
  if (
    parent.status === 'waiting_child' &&
    w?.kind === 'child' &&
    w.step === child.step &&
    w.children.some((c) => c.runId === child.runId)
  )
    return false;
  return parent.cursor > child.step;
}

/** A child run whose parent moved on (parentMovedOn): the parent's id and status (`missing` when gone). */
export interface MovedOnParent {
  parentRunId: string;
  parentStatus: RunStatus | 'missing';
}

/**
 * The parent a run must not be put back to work without (parentMovedOn), or undefined: not a child, or its parent
 * still takes its outcome. Read before the script that puts the run back to work: the parent lives on another shard
 * (its own Cluster slot), so it cannot be read in that script. A wake that takes the outcome after this read has
 * marked the child first, on the child's own slot, and that script refuses a marked child
 * (includes/outcomeTaken.lua). The child's steps check the parent before each step (src/worker/step/cancel.ts),
 * which ends a child at work when its parent moved on.
 */
export async function movedOnParentOf(
  redis: RedisClient,
  keys: KeySpace,
  spec: Pick<RunSpec, 'runId' | 'parent'> | undefined,
): Promise<MovedOnParent | undefined> {
  const parent = spec?.parent;
  if (!parent) return undefined;
  const standing = await readParentStanding(redis, keys, parent.runId);
  if (!parentMovedOn(standing, { runId: spec.runId, step: parent.step })) return undefined;
  return { parentRunId: parent.runId, parentStatus: standing?.status ?? 'missing' };
}

/** The parent's status, cursor and wait in one read; undefined when it is gone. */
export async function readParentStanding(
  redis: RedisClient,
  keys: KeySpace,
  parentRunId: string,
): Promise<ParentStanding | undefined> {
  const run = await readRun(redis, keys, parentRunId, ['cursor', 'wait']);
  return run ? { status: run.status, cursor: run.cursor, wait: parseWait(run.wait ?? null) } : undefined;
}

/** The child runs of a process's context. */
export function childRunsOf(ctx: {
  redis: RedisClient;
  keys: KeySpace;
  queues: ShardQueues;
  cfg: { RUN_RETENTION_MS: number };
}): ChildRuns {
  return new ChildRuns({ redis: ctx.redis, keys: ctx.keys, queues: ctx.queues, retentionMs: ctx.cfg.RUN_RETENTION_MS });
}

export class ChildRuns {
  constructor(private readonly d: { redis: RedisClient; keys: KeySpace; queues: ShardQueues; retentionMs: number }) {}

  /**
   * Lists the child on its parent, before it is created; the set lives as long as the parent may (its deadline). With
   * a hand-off digest, the hand-off is recorded in the same change (the first child of a hand-off stays its child):
   * one slot, the parent's.
   */
  async list(
    parentRunId: string,
    childRunId: string,
    parentDeadlineAt: number,
    now: number,
    handoff?: string,
  ): Promise<void> {
    const k = this.d.keys.run(parentRunId);
    const ttl = Math.max(0, parentDeadlineAt - now) + this.d.retentionMs;
    const tx = this.d.redis.multi().sadd(k.children, childRunId).pexpire(k.children, ttl);
    if (handoff) tx.hsetnx(k.handoffs, handoff, childRunId).pexpire(k.handoffs, ttl);
    await tx.exec();
  }

  /**
   * The child an earlier call of the same hand-off (its digest, handoffDigestOf) started, or undefined: none, or
   * this call's own child (`ownChildRunId`, from its run, step and call) is that child or is listed already: a step
   * redelivered after it listed its child, or a child listed before hand-offs were recorded, keeps its own.
   */
  async earlier(parentRunId: string, digest: string, ownChildRunId: string): Promise<string | undefined> {
    const k = this.d.keys.run(parentRunId);
    const [mapped, ownListed] = await Promise.all([
      this.d.redis.hget(k.handoffs, digest),
      this.d.redis.sismember(k.children, ownChildRunId),
    ]);
    return mapped && mapped !== ownChildRunId && ownListed === 0 ? mapped : undefined;
  }

  async childrenOf(parentRunId: string): Promise<string[]> {
    return (await this.d.redis.smembers(this.d.keys.run(parentRunId).children)).sort();
  }

  /**
   * The child's status and spend; its final answer once it completed. A child that does not exist (its creation
   * lost, or expired) has ended `failed` / `child_missing`.
   */
  async outcome(childRunId: string): Promise<ChildOutcome> {
    const k = this.d.keys.run(childRunId);
    const [run, used, tail, listed] = await Promise.all([
      readRun(this.d.redis, this.d.keys, childRunId, ['reason']),
      readBudget(this.d.redis, this.d.keys, childRunId, ['stepsUsed', 'tokensUsed', 'costUsed']),
      readJournal(this.d.redis, k, -3, -1), // an ended child's journal is packed; a long final answer compressed
      this.actionsOf(childRunId),
    ]);
    if (!run) return { ended: true, status: 'failed', reason: 'child_missing', steps: 0, tokens: 0, actions: [] };
    const out: ChildOutcome = {
      ended: endsRun(run.status),
      status: run.status,
      reason: run.reason,
      steps: used.stepsUsed,
      tokens: used.tokensUsed,
      cost: used.costUsed,
      ...listed,
    };
    if (run.status !== 'completed') return out;
    for (const [i, raw] of tail.reverse().entries()) {
      const e = decodeEntry(raw, -1 - i);
      if (e.kind === 'decision' && typeof e.final === 'string') return { ...out, answer: e.final };
    }
    return out;
  }

  /**
   * The child's ledger actions (its own, and its compensations), oldest first, as ids and states: read from the
   * records its `actions` set names (the ledger's own module sits above this layer).
   */
  private async actionsOf(childRunId: string): Promise<Pick<ChildOutcome, 'actions' | 'moreActions'>> {
    const keys = await this.d.redis.smembers(this.d.keys.run(childRunId).actions);
    const fields = ['actionId', 'tool', 'state', 'receipt', 'outcome', 'step', 'createdAt'] as const;
    const records = await Promise.all(keys.map((key) => this.d.redis.hmget(key, ...fields)));
    const actions = records
      .filter((r) => r[0] && r[1] && r[2])
      .map(([actionId, tool, state, receipt, outcome, step, createdAt]) => ({
        action: {
          tool: tool!,
          state: state!,
          actionId: actionId!,
          ...(outcome === 'rejected_by_service' ? { outcome } : {}),
          ...(state === 'confirmed' && receipt && RECEIPT_ID.test(receipt) ? { receipt } : {}),
        } satisfies ChildAction,
        order: [Number(step), Number(createdAt)] as const,
      }))
      .sort((a, b) => a.order[0] - b.order[0] || a.order[1] - b.order[1])
      .map((a) => a.action);
    const more = actions.length - CHILD_ACTIONS_LISTED;
    return { actions: actions.slice(0, CHILD_ACTIONS_LISTED), ...(more > 0 ? { moreActions: more } : {}) };
  }

  /**
   * The parent's wake takes the child's outcome: the child is marked so nothing puts it back to work after
   * (takeChildOutcome-1.lua), only while it counts as ended, or whatever it does at the parent's deadline. `at_work`:
   * not marked, the child works (an operator put it back to work after the wake read it ended).
   */
  async take(childRunId: string, parentRunId: string, atDeadline: boolean): Promise<TakeReply> {
    return takeChildOutcome(this.d.redis, this.d.keys.run(childRunId).run, { parentRunId, atDeadline });
  }

  /** The parent's status, cursor and wait (undefined when it is gone): whether it still takes a child's outcome. */
  async parentStanding(parentRunId: string): Promise<ParentStanding | undefined> {
    return readParentStanding(this.d.redis, this.d.keys, parentRunId);
  }

  /**
   * A child ended: its parent's wake job, if the parent still waits on this child and every other child it waits on
   * ended too, is promoted so the parent resumes now rather than at its deadline. Each child checks after its own
   * last commit, so the last of them to check sees them all ended. Returns whether a job was promoted (false:
   * nothing waits, a child is still at work, or the job already left the delayed set, which is as good).
   */
  async wakeParent(parentRunId: string, childRunId: string): Promise<boolean> {
    const parent = await readRun(this.d.redis, this.d.keys, parentRunId, ['wait', 'jobId']);
    const wait = parseWait(parent?.wait ?? null);
    const jobId = parent?.jobId;
    if (parent?.status !== 'waiting_child' || wait?.kind !== 'child' || !jobId) return false;
    if (!wait.children.some((c) => c.runId === childRunId) || !(await this.allEnded(wait.children))) return false;
    return this.promote(parentRunId, jobId);
  }

  /**
   * The parent's wake job promoted when all its children ended (by `endedBy` at the latest: the sweep leaves a child
   * that ended a moment ago to its own promotion). The parent's own commit calls it for children that ended before
   * the park; the stuck-run sweep for a promotion that was lost (the last child's process died between its last
   * commit and the promotion).
   */
  async wakeIfChildEnded(parentRunId: string, endedBy = Infinity): Promise<boolean> {
    const parent = await readRun(this.d.redis, this.d.keys, parentRunId, ['wait', 'jobId']);
    const wait = parseWait(parent?.wait ?? null);
    const jobId = parent?.jobId;
    if (parent?.status !== 'waiting_child' || wait?.kind !== 'child' || !jobId) return false;
    if (!(await this.allEnded(wait.children, endedBy))) return false;
    return this.promote(parentRunId, jobId);
  }

  /** Whether every child ended (terminal, handed to a person, or gone), each by `endedBy`. */
  async allEnded(children: readonly { runId: string }[], endedBy = Infinity): Promise<boolean> {
    const states = await Promise.all(children.map((c) => readRun(this.d.redis, this.d.keys, c.runId, ['updatedAt'])));
    return states.every((run) => run === undefined || (endsRun(run.status) && run.updatedAt <= endedBy));
  }

  /** False when the job is gone or left the delayed set first; a store error is thrown to the caller, which names it. */
  private async promote(parentRunId: string, jobId: string): Promise<boolean> {
    const job = await this.d.queues.forRun(parentRunId).getJob(jobId);
    return job ? promoteIfDelayed(job) : false;
  }
}
