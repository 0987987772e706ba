/**
 * The store a step needs, and nothing more: the run's state and spec, its
 * transcript, and the fenced scripts a step runs (journal a decision, journal
 * one call's observation, charge abandoned attempts, commit). src/worker/step/redisStore.ts is the real
 * one (RunStore and the typed script calls); unit tests use an in-memory one.
 * Every write is fenced by the job's lock token and the run's cursor: a refusal
 * throws the FenceError of its code (lock_lost, stale_step, run_missing,
 * run_not_running, decision_exists) and writes nothing.
 */
import type { Logger } from 'pino';
import type { DecisionEntry, JournalEntry, ObservationEntry, StoredEntry } from '../../core/journal.js';
import type { RunState } from '../../runs/store.js';
import type { RunSpec, StepJobData } from '../../runs/spec.js';
import type { AwaitReply } from '../../store/calls/awaitEvent.js';
import type { SettleReply } from '../../store/calls/settleEventWait.js';
import type { TextStream } from '../textStream.js';
import type { CommitPlan, StepJob } from './state.js';

/** A decision journalled before its writes run (and its usage charged), in one fenced script. */
export interface DecisionWrite {
  runId: string;
  decision: DecisionEntry;
  /** The decision, encoded as the journal stores it (packEntry). */
  encoded: StoredEntry;
  /** Bytes the transcript grows by; undefined when the run keeps no byte count. */
  contextBytesDelta: number | undefined;
  /** This delivery's step_started event, '' when a script of this delivery already wrote it. */
  startedEvent: string;
  now: number;
  /** µ$ the step's attempts cost that no earlier script of this delivery charged (the decision's and failed ones). */
  costDelta?: number;
}

/** One call's observation journalled when it finished (a step of several calls whose decision is journalled). */
export interface ObservationWrite {
  runId: string;
  observation: ObservationEntry;
  /** The observation, encoded as the journal stores it (packEntry). */
  encoded: StoredEntry;
  contextBytesDelta: number | undefined;
}

/** A parked wait's run woken by its wake job: running again, the wait's result journalled (if it has one). */
export interface WakeWrite {
  runId: string;
  step: number;
  /** The wait's results (an event's payload or timeout, each child's outcome); none for a sleep. */
  entries: JournalEntry[];
  /** The entries, encoded as the journal stores them (packEntry). */
  encoded: StoredEntry[];
  contextBytesDelta: number | undefined;
  /** The `woke` event (JSON). */
  event: string;
  now: number;
  /** The children's spend, charged to this run with the resume (absent for other waits). */
  charge?: { steps: number; tokens: number; cost?: number };
}

/** One event key of a tenant's agent, and the wait on it. */
export interface EventWait {
  tenant: string;
  agent: string;
  key: string;
  waitId: string;
  /** The wait's due time (ms). */
  at: number;
  now: number;
}

/** One step's commit, as one record: the plan, its encoded entries, the next job, and what rides along. */
export interface StepCommit {
  runId: string;
  step: number;
  plan: CommitPlan;
  /** The plan's entries, encoded as the journal stores them (packEntry). */
  encoded: readonly StoredEntry[];
  contextBytesDelta: number | undefined;
  /** The next step's job data; undefined when the run stops or parks (no job is added). */
  next: StepJobData | undefined;
  /** The next step's job's BullMQ priority (flow control: its tenant's share); 0 for a standard job. */
  nextPriority: number;
  /** The commit also fetches the worker's next job. */
  fetchNext: boolean;
  startedEvent: string;
  now: number;
  /** The digest of the step's decision when it was journalled before this commit (the commit must follow it). */
  decision: string | undefined;
  /** µ$ the step's attempts cost that no earlier script of this delivery charged. */
  costDelta: number;
}

export interface CommitReply {
  /** The status committed: the plan's, or what a recorded cancel or an expired approval made of it. */
  committed: string;
  /** BullMQ's negative code when it refused the completion (the commit stands; its worker completes the job). */
  completionRefused?: number;
}

/** A text stream's place: the job it belongs to and whether this delivery is a redelivery. */
export interface StreamTarget {
  runId: string;
  step: number;
  startedEvent: string;
  redelivered: boolean;
  log: Logger;
}

export interface StepStore {
  /** The run's spec (cached: specs never change); undefined for an unknown run. */
  spec(runId: string): Promise<RunSpec | undefined>;
  /** Drops the cached spec: an operator may have re-pinned the run. */
  forgetSpec(runId: string): void;
  readState(runId: string): Promise<RunState | undefined>;
  /** The journal's entry at `index`, with its digest (entryDigest of its bytes as stored); undefined past the end. */
  journalEntry(runId: string, index: number): Promise<{ entry: JournalEntry; digest: string } | undefined>;
  /** Makes sure the job of the run's current step exists (a stale or refused job's only duty). */
  ensureCurrentStepJob(runId: string): Promise<void>;
  cancelRequested(runId: string): Promise<boolean>;
  /** The run's journal (cached per worker: only new entries are read). */
  transcript(runId: string): Promise<JournalEntry[]>;
  forgetTranscript(runId: string): void;
  journalDecision(job: StepJob, d: DecisionWrite): Promise<void>;
  /** Appends one call's observation after the step's journalled decision (fenced; see journalObservation-5.lua). */
  journalObservation(job: StepJob, w: ObservationWrite): Promise<void>;
  /** Charges tokens of attempts abandoned before a decision (fenced; refused silently by the caller). */
  chargeTokens(job: StepJob, runId: string, step: number, tokens: number, cost?: number): Promise<void>;
  commit(job: StepJob, c: StepCommit): Promise<CommitReply>;
  /**
   * Adds a parked wait's wake job (the run's current job), delayed until `atMs`; a no-op if it exists. For a wait
   * on an event (`event`), a delivery that came before the job existed (its deliverer found no job to promote)
   * promotes the job now: the deliverer checks for the job after its delivery, this checks for a delivery after
   * the job, so one of the two sees the other.
   */
  addWakeJob(
    data: StepJobData,
    atMs: number,
    event?: { tenant: string; agent: string; key: string; waitId: string },
  ): Promise<void>;
  /** Wakes a parked wait's run (fenced; false when an earlier delivery of the job already woke it). */
  wake(job: StepJob, w: WakeWrite): Promise<boolean>;
  /** Registers a run's wait on an event key (a delivery kept for the key is consumed at once). */
  awaitEvent(w: EventWait & { runId: string }): Promise<AwaitReply>;
  /** Settles a wait on an event key: its delivery, its timeout, or `early` (neither yet). */
  settleEventWait(w: EventWait): Promise<SettleReply>;
  /** This delivery's streamed answer text, when streaming is on. */
  textStream(job: StepJob, target: StreamTarget): TextStream | undefined;
}
