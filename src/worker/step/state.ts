/**
 * The one object a step's stages share (load -> decide -> act -> commit), and
 * the plan a stage hands to the commit. Stages read and grow the state; what a
 * stage may change is marked mutable here and nowhere else.
 */
import type { Context } from '@opentelemetry/api';
import type { Logger } from 'pino';
import type { DecisionEntry, JournalEntry, ObservationEntry, TokenUsage } from '../../core/journal.js';
import type { RunUsage } from '../../budget/tenantBudget.js';
import type { RunSpec, StepJobData } from '../../runs/spec.js';
import type { CapturedAdd } from '../../store/bullmqInternals.js';
import type { WaitRecord } from '../../runs/waits.js';
import type { RunStatus } from '../../core/status.js';

/**
 * The delivery of one step job, as the stages see it: BullMQ's Job and the lock
 * token behind a narrow face (src/worker/step/redisStore.ts wraps the real one).
 */
export interface StepJob {
  readonly id: string;
  readonly token: string;
  /** The job's data as it left the queue (validated by the load stage). */
  readonly data: unknown;
  /** BullMQ's deliveries started and attempts made, and the attempts the job may make. */
  readonly attemptsStarted: number;
  readonly attemptsMade: number;
  readonly maxAttempts: number;
  /** The job's creation time: tells apart two jobs made for the same step. */
  readonly timestamp: number;
  /** Moves the job to the delayed set until `untilMs` (the caller then throws DelayedError). */
  delay(untilMs: number): Promise<void>;
  updateData(data: StepJobData): Promise<void>;
  /** BullMQ's completion of this job, to ride in the commit (fetching the worker's next job when asked). */
  completion(fetchNext: boolean): CapturedAdd;
  /** The commit completed the job: BullMQ's own completion call is answered with `reply`. */
  completedBy(reply: unknown, completion: CapturedAdd): void;
}

export interface Terminal {
  status: RunStatus;
  reason: string;
}

/** What the commit writes: the step's entries and the run's next status, with the budget's deltas. */
export interface CommitPlan {
  entries: JournalEntry[];
  /** The entries start with the step's decision (not journalled before). */
  carriesDecision: boolean;
  status: RunStatus;
  reason: string;
  stepsDelta: number;
  tokensDelta: number;
  /** Move the cursor on (false: the run stops or parks at this step). */
  advance: boolean;
  /** A park into waiting_approval: the action whose approval the commit records. */
  approvalFor?: string;
  /** A park on a wait (sleeping | waiting_event): recorded on the run; its wake job is added after the commit. */
  wait?: WaitRecord;
}

/** The step as its stages see it: built by the load stage, grown by decide and act, written by the commit. */
export interface StepState {
  readonly job: StepJob;
  readonly data: StepJobData;
  readonly runId: string;
  readonly step: number;
  /** The run's spec with the limits its job carries (an operator's retry may have extended them). */
  readonly spec: RunSpec;
  /** A delivery that is not the first of a job the previous commit made: the state was read from Redis. */
  readonly redelivered: boolean;
  readonly signal: AbortSignal;
  /** Aborted when the grace period ends: a write in flight is cut off (the ledger keeps it dispatched). */
  readonly dispatchSignal: AbortSignal;
  readonly trace: Context | undefined;
  readonly log: Logger;
  /** process.hrtime of the delivery's start (the step's duration metric). */
  readonly started: bigint;
  /** This delivery's step_started event: it rides in the first script this delivery runs. */
  readonly startedEvent: string;
  /** The run's cancel was recorded when the load stage read its state (a redelivery; false on a first delivery). */
  readonly cancelRequested: boolean;
  /** The run's budget usage as of the last write this delivery knows (grown by journalDecision). */
  used: RunUsage;
  /** A script of this delivery has written the step_started event. */
  startedEmitted: boolean;
  /** The step's decision: journalled by an earlier delivery, or made by this one. */
  decision?: DecisionEntry;
  /**
   * The journalled decision's digest (entryDigest). Every write that follows it (an action's plan, the commit of
   * the step's observations) names it, and the store refuses the write where its journal holds another decision or
   * none: a decision a failover took back must not be acted on. Unset while the decision rides in the commit.
   */
  decisionDigest?: string;
  /** The wait this wake job ends (the run is parked on it): settled before the step decides. */
  readonly waking?: WaitRecord;
  /** Observations of this step an earlier delivery journalled after the decision: those calls are not run again. */
  observed?: readonly ObservationEntry[];
  /** The decision rides in the commit (no write followed it and it was not journalled). */
  carriesDecision: boolean;
  /**
   * µ$ this delivery's model attempts cost and no script has charged yet: the first script that charges the step's
   * tokens (journalDecision, chargeTokens, the commit) charges it and zeroes it, so each attempt's cost is charged
   * once, whichever way the step ends.
   */
  costUncharged: number;
}

/** The commit that stops (or parks) the run at this step with `t`, after `observations`; the step is not counted. */
export function stopPlan(step: number, t: Terminal, observations: ObservationEntry[] = []): CommitPlan {
  return {
    entries: [...observations, { v: 1, kind: 'status', step, status: t.status, reason: t.reason }],
    carriesDecision: false,
    status: t.status,
    reason: t.reason,
    stepsDelta: 0,
    tokensDelta: 0,
    advance: false,
  };
}

/** A model call's tokens, prompt and completion. */
export function total(u: TokenUsage): number {
  return u.promptTokens + u.completionTokens;
}

/** Run usage with the transcript's byte count grown by `bytes` (left unknown when it was). */
export function grown(used: RunUsage, bytes: number): RunUsage {
  const cost = used.cost ? { cost: used.cost } : {};
  return used.contextBytes === undefined
    ? { steps: used.steps, tokens: used.tokens, ...cost }
    : { ...used, contextBytes: used.contextBytes + bytes };
}
