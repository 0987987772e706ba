/**
 * Agents that call agents: an agent tool's call (defineAgentTool) starts a child run and parks its parent
 * `waiting_child` until the child ends. The parts that live on the run's side:
 *
 *  - the child's identity: its intake event derives from the parent's run, step and call (childEventOf), so a
 *    step redelivered before its commit finds the same child (createRun's idempotency) instead of starting another;
 *  - the tree: the parent's `children` set (added before the child is created, so a child never exists unlisted)
 *    and the child's spec `parent`;
 *  - the outcome the parent's wake reads from the child's run hash (status, reason, final answer, spend);
 *  - the parent's wake job promoted when the child ends (by the child's last commit, a cancel, or the stuck-run
 *    sweep when those were lost: late, never lost).
 *
 * BullMQ's flows (parent/child job dependencies) do not fit: a step is a chain of jobs each committed by our own
 * scripts, and a parked parent has no job at all while it waits (its wake job is added after the park), so there
 * is no parent job for a flow to hold in `waiting-children`. The child's end is read from its run, the source of truth.
 */
import { createHash } from 'node:crypto';
import type { RedisClient } from '../store/connect.js';
import type { KeySpace } from '../store/keys.js';
import { decodeEntry } from '../core/journal.js';
import type { ChildBudget } from '../core/tool.js';
import type { ShardQueues } from './queues.js';
import { endsRun } from './status.js';
import { parseWait } from './waits.js';

/** A child run to start: the parent that asks, the agent and input, and limits already carved out of the parent's. */
export interface ChildStartRequest {
  parent: { runId: string; step: number; callId: string; tenant: string; deadlineAt: number };
  agent: string;
  input: unknown;
  limits: { maxSteps: number; maxTokens: number; deadlineAt: number };
  now: number;
}

export type ChildStart =
  | { kind: 'started'; runId: string; created: boolean }
  /** Nothing written: the agent is not run here, or the input does not pass its schema (fields named). */
  | { kind: 'refused'; error: 'unknown_agent' | 'invalid_input'; fields: { path: string; message: string }[] }
  /** This process was given no starter (a worker built without the producer's intake). */
  | { kind: 'refused'; error: 'unavailable' };

/** Starts child runs through the intake (src/producer/childRuns.ts; given to the worker by the composition root). */
export interface ChildRunStarter {
  start(req: ChildStartRequest): Promise<ChildStart>;
}

/** What the parent's wake reads of its child: its status, and what it spent so far. */
export interface ChildOutcome {
  /** Terminal, or handed to a person: the parent's wait is over. */
  ended: boolean;
  status: string;
  reason: string;
  /** The child's final answer, when it completed. */
  answer?: string;
  steps: number;
  tokens: number;
  /** When the child's run last changed (its end, once it ended); 0 when it does not exist. */
  updatedAt: number;
}

/** The intake event of a parent's call: one child per (parent run, step, call), whatever the redeliveries. */
export function childEventOf(parentRunId: string, step: number, callId: string): string {
  const digest = createHash('sha256').update(`${parentRunId}\u0000${step}\u0000${callId}`).digest('hex');
  return `child:${digest.slice(0, 32)}`;
}

/**
 * The child's limits: what the call asks, never more than the parent has left. Steps: the parent's left after the
 * step that asks (which is counted at its commit); tokens: the parent's left now; deadline: the parent's at the
 * latest. Undefined when the parent has no step or token left to give.
 */
export function carveLimits(
  parent: { maxSteps: number; maxTokens: number; deadlineAt: number },
  used: { steps: number; tokens: number },
  asked: ChildBudget | undefined,
  now: number,
): ChildStartRequest['limits'] | undefined {
  const stepsLeft = parent.maxSteps - used.steps - 1;
  const tokensLeft = parent.maxTokens - used.tokens;
  const maxSteps = Math.min(stepsLeft, asked?.maxSteps ?? Infinity);
  const maxTokens = Math.min(tokensLeft, asked?.maxTokens ?? Infinity);
  const deadlineAt = Math.min(parent.deadlineAt, now + (asked?.maxWallMs ?? Infinity));
  if (!(maxSteps >= 1 && maxTokens >= 1 && deadlineAt > now)) return undefined;
  return { maxSteps: Math.floor(maxSteps), maxTokens: Math.floor(maxTokens), deadlineAt: Math.floor(deadlineAt) };
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

  /** Lists the child on its parent, before it is created; the set lives as long as the parent may (its deadline). */
  async list(parentRunId: string, childRunId: string, parentDeadlineAt: number, now: number): Promise<void> {
    const key = this.d.keys.run(parentRunId).children;
    await this.d.redis
      .multi()
      .sadd(key, childRunId)
      .pexpire(key, Math.max(0, parentDeadlineAt - now) + this.d.retentionMs)
      .exec();
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
    const [[status, reason, updatedAt], [steps, tokens], tail] = await Promise.all([
      this.d.redis.hmget(k.run, 'status', 'reason', 'updatedAt'),
      this.d.redis.hmget(k.budget, 'stepsUsed', 'tokensUsed'),
      this.d.redis.lrange(k.journal, -3, -1),
    ]);
    if (status === null || status === undefined)
      return { ended: true, status: 'failed', reason: 'child_missing', steps: 0, tokens: 0, updatedAt: 0 };
    const out: ChildOutcome = {
      ended: endsRun(status),
      status,
      reason: reason ?? '',
      steps: Number(steps ?? 0),
      tokens: Number(tokens ?? 0),
      updatedAt: Number(updatedAt ?? 0),
    };
    if (status !== 'completed') return out;
    for (const [i, raw] of tail.reverse().entries()) {
      const e = decodeEntry(raw, -1 - i);
      if (e.kind === 'decision' && typeof e.final === 'string') return { ...out, answer: e.final };
    }
    return out;
  }

  /** The parent's status ('' when it is gone). */
  async parentStatus(parentRunId: string): Promise<string> {
    return (await this.d.redis.hget(this.d.keys.run(parentRunId).run, 'status')) ?? '';
  }

  /**
   * A child ended: its parent's wake job, if the parent still waits on this child, is promoted so the parent resumes
   * now rather than at its deadline. Returns whether a job was promoted (false: nothing waits, or it already left the
   * delayed set, which is as good).
   */
  async wakeParent(parentRunId: string, childRunId: string): Promise<boolean> {
    const run = this.d.keys.run(parentRunId).run;
    const [status, rawWait, jobId] = await this.d.redis.hmget(run, 'status', 'wait', 'jobId');
    const wait = parseWait(rawWait);
    if (status !== 'waiting_child' || wait?.kind !== 'child' || wait.childRunId !== childRunId || !jobId) return false;
    const job = await this.d.queues.forRun(parentRunId).getJob(jobId);
    if (!job || !(await job.isDelayed())) return false;
    return job.promote().then(
      () => true,
      () => false,
    );
  }

  /**
   * The parent's wake job promoted when its child ended (by `endedBy` at the latest: the sweep leaves a child that
   * ended a moment ago to its own promotion). The parent's own commit calls it for a child that ended before the
   * park; the stuck-run sweep for a child whose promotion was lost (its process died between its last commit and
   * the promotion).
   */
  async wakeIfChildEnded(parentRunId: string, endedBy = Infinity): Promise<boolean> {
    const wait = parseWait(await this.d.redis.hget(this.d.keys.run(parentRunId).run, 'wait'));
    if (wait?.kind !== 'child') return false;
    const child = await this.outcome(wait.childRunId);
    if (!child.ended || child.updatedAt > endedBy) return false;
    return this.wakeParent(parentRunId, wait.childRunId);
  }
}
