/**
 * The step's store on Redis: RunStore and RunSpecCache for reads, the typed
 * script calls (journalDecision, chargeTokens, commitStep) for the fenced writes,
 * and BullMQ's own job commands for the job's moves. The only module of the step
 * that knows key names (through KeySpace) and BullMQ's internals.
 */
import type { Job } from 'bullmq';
import { decodeEntry, entryDigest, type DecisionEntry } from '../../core/journal.js';
import type { CrashPoints } from '../../config/testHooks.js';
import type { Metrics } from '../../metrics/metrics.js';
import type { RedisClient } from '../../store/connect.js';
import { type KeySpace, stepJobId } from '../../store/keys.js';
import type { RunSpecCache, RunStore } from '../../runs/store.js';
import type { TranscriptCache } from '../../runs/transcriptCache.js';
import { promoteIfDelayed, STEP_JOB_NAME } from '../../store/queues.js';
import type { StepJobData } from '../../runs/spec.js';
import {
  captureAddJob,
  captureMoveToCompleted,
  completeFromCommit,
  type CapturedAdd,
} from '../../store/bullmqInternals.js';
import { isScriptError } from '../../store/codes.js';
import { commitStep } from '../../store/calls/commitStep.js';
import { chargeTokens } from '../../store/calls/chargeTokens.js';
import { journalDecision } from '../../store/calls/journalDecision.js';
import { journalObservation } from '../../store/calls/journalObservation.js';
import { awaitEvent, type AwaitReply } from '../../store/calls/awaitEvent.js';
import { settleEventWait, type SettleReply } from '../../store/calls/settleEventWait.js';
import { releaseIfHolderEnded } from '../../runs/waits.js';
import { wakeRun } from '../../store/calls/wakeRun.js';
import { TextStream } from '../textStream.js';
import type { StepOptions } from './env.js';
import type {
  CommitReply,
  DecisionWrite,
  EventWait,
  ObservationWrite,
  StepCommit,
  StepStore,
  StreamTarget,
  WakeWrite,
} from './store.js';
import type { StepJob } from './state.js';
import { decisionEvent, observationEvent } from './events.js';
import { readRun } from '../../store/runRecord.js';
import { retentionAtEnd } from '../../store/archiveQueue.js';

/** A BullMQ job and the lock token this delivery holds it with. */
export class BullStepJob implements StepJob {
  constructor(
    readonly job: Job,
    readonly token: string,
  ) {}

  get id(): string {
    return this.job.id!;
  }

  get data(): unknown {
    return this.job.data as unknown;
  }

  get attemptsStarted(): number {
    return this.job.attemptsStarted;
  }

  get attemptsMade(): number {
    return this.job.attemptsMade;
  }

  get maxAttempts(): number {
    return this.job.opts.attempts ?? 1;
  }

  get timestamp(): number {
    return this.job.timestamp;
  }

  async delay(untilMs: number): Promise<void> {
    await this.job.moveToDelayed(untilMs, this.token);
  }

  async updateData(data: StepJobData): Promise<void> {
    await this.job.updateData(data);
  }

  completion(fetchNext: boolean): CapturedAdd {
    return captureMoveToCompleted(this.job, this.token, fetchNext);
  }

  completedBy(reply: unknown, completion: CapturedAdd): void {
    completeFromCommit(this.job, reply, Number(completion.argv[1]));
  }
}

type StoreOptions = Pick<
  StepOptions,
  | 'EVENTS_MAX_LEN'
  | 'RUN_RETENTION_MS'
  | 'ARCHIVE_URL'
  | 'APPROVAL_TTL_MS'
  | 'EVENT_KEEP_MS'
  | 'MODEL_STREAMING'
  | 'MODEL_STREAM_FLUSH_MS'
  | 'MODEL_STREAM_FLUSH_CHARS'
>;

export interface RedisStepStoreDeps {
  cfg: StoreOptions;
  redis: RedisClient;
  keys: KeySpace;
  runs: RunStore;
  specs: RunSpecCache;
  transcripts: TranscriptCache;
  metrics: Metrics;
  /** Test-only crash points (the `mid_stream` one fires inside the text stream). */
  crash?: CrashPoints | undefined;
}

export class RedisStepStore implements StepStore {
  constructor(private readonly d: RedisStepStoreDeps) {}

  spec(runId: string) {
    return this.d.specs.get(runId);
  }

  forgetSpec(runId: string): void {
    this.d.specs.forget(runId);
  }

  readState(runId: string) {
    return this.d.runs.readState(runId);
  }

  async journalEntry(runId: string, index: number) {
    // Bytes: the entry may be stored compressed, and its digest is of the stored bytes.
    const raw = await this.d.redis.lindexBuffer(this.d.keys.run(runId).journal, index);
    return raw === null ? undefined : { entry: decodeEntry(raw, index), digest: entryDigest(raw) };
  }

  ensureCurrentStepJob(runId: string): Promise<void> {
    return this.d.runs.ensureCurrentStepJob(runId);
  }

  async cancelRequested(runId: string): Promise<boolean> {
    return (await readRun(this.d.redis, this.d.keys, runId, ['cancelRequested']))?.cancelRequested ?? false;
  }

  transcript(runId: string) {
    return this.d.transcripts.load(this.d.redis, runId, this.d.keys.run(runId).journal);
  }

  forgetTranscript(runId: string): void {
    this.d.transcripts.forget(runId);
  }

  private lockOf(runId: string, job: StepJob): string {
    return this.d.keys.jobLock(this.d.keys.shardOf(runId), job.id);
  }

  async journalDecision(job: StepJob, w: DecisionWrite): Promise<void> {
    const keys = this.journalKeys(job, w.runId);
    await journalDecision(this.d.redis, keys, {
      token: job.token,
      step: w.decision.step,
      tokensDelta: w.decision.usage.promptTokens + w.decision.usage.completionTokens,
      costDelta: w.costDelta,
      contextBytesDelta: w.contextBytesDelta,
      entry: w.encoded,
      now: w.now,
      eventsMaxLen: this.d.cfg.EVENTS_MAX_LEN,
      event: decisionEvent(w.decision),
      jobId: job.id,
      startedEvent: w.startedEvent,
    });
  }

  async journalObservation(job: StepJob, w: ObservationWrite): Promise<void> {
    const keys = this.journalKeys(job, w.runId);
    await journalObservation(this.d.redis, keys, {
      token: job.token,
      step: w.observation.step,
      jobId: job.id,
      entry: w.encoded,
      contextBytesDelta: w.contextBytesDelta,
      eventsMaxLen: this.d.cfg.EVENTS_MAX_LEN,
      event: observationEvent(w.observation),
    });
  }

  async chargeTokens(job: StepJob, runId: string, step: number, tokens: number, cost = 0): Promise<void> {
    const k = this.d.keys.run(runId);
    const keys = { run: k.run, budget: k.budget, jobLock: this.lockOf(runId, job) };
    await chargeTokens(this.d.redis, keys, { token: job.token, step, jobId: job.id, tokens, cost });
  }

  /**
   * One request: the fenced commit, the next step's job, and the completion of this job
   * (BullMQ's moveToFinished, optionally fetching the worker's next job). If the process
   * dies after it, the run is wholly after the commit and this job is already completed.
   */
  async commit(job: StepJob, c: StepCommit): Promise<CommitReply> {
    const { runId, step, plan } = c;
    const queue = this.d.runs.queues.forRun(runId);
    // When the run stops, the next job's keys are still passed (the script declares them) but no job is added.
    // Under flow control the next job is prioritized by its tenant's share (src/flow/stepPriority.ts).
    const opts = this.d.runs.queues.jobOptions(runId, step + 1);
    if (c.nextPriority > 0) opts.priority = c.nextPriority;
    const next = captureAddJob(queue, STEP_JOB_NAME, c.next ?? {}, opts);
    const finish = job.completion(c.fetchNext);
    const { finished, committed } = await commitStep(this.d.redis, this.commitKeys(job, runId, plan.approvalFor), {
      token: job.token,
      step,
      status: plan.status,
      reason: plan.reason,
      stepsDelta: plan.stepsDelta,
      tokensDelta: plan.tokensDelta,
      costDelta: c.costDelta,
      contextBytesDelta: c.contextBytesDelta,
      now: c.now,
      eventsMaxLen: this.d.cfg.EVENTS_MAX_LEN,
      advance: plan.advance,
      retentionMs: retentionAtEnd(this.d.cfg),
      committedEvent: JSON.stringify({ step, status: plan.status, entries: c.encoded.length }),
      carriesDecision: plan.carriesDecision,
      jobId: job.id,
      nextJobId: stepJobId(runId, step + 1),
      entries: c.encoded,
      finish,
      next,
      addNext: c.next !== undefined,
      startedEvent: c.startedEvent,
      decisionEvent: plan.carriesDecision ? decisionEvent(plan.entries[0] as DecisionEntry) : '',
      approvalFor: plan.approvalFor ?? '',
      approvalExpiresAt: c.now + this.d.cfg.APPROVAL_TTL_MS,
      wait: plan.wait ? JSON.stringify(plan.wait) : '',
      decision: c.decision,
    });
    if (isScriptError(finished)) return { committed, completionRefused: finished };
    job.completedBy(finished, finish);
    return { committed };
  }

  async addWakeJob(
    data: StepJobData,
    atMs: number,
    event?: { tenant: string; agent: string; key: string; waitId: string },
  ): Promise<void> {
    const { runId, step } = data;
    const opts = this.d.runs.queues.jobOptions(runId, step);
    const delay = Math.max(0, atMs - Date.now());
    const job = await this.d.runs.queues.forRun(runId).add(STEP_JOB_NAME, data, { ...opts, delay });
    if (!event || delay === 0) return;
    const [state, waitId] = await this.d.redis.hmget(
      this.d.keys.eventKey(event.tenant, event.agent, event.key),
      'state',
      'waitId',
    );
    // Delivered already: the wake job runs now. The delivery's producer promotes it too (whichever comes second
    // finds it promoted).
    if (state === 'delivered' && waitId === event.waitId) await promoteIfDelayed(job);
  }

  async wake(job: StepJob, w: WakeWrite): Promise<boolean> {
    const keys = this.journalKeys(job, w.runId);
    return wakeRun(this.d.redis, keys, {
      token: job.token,
      step: w.step,
      jobId: job.id,
      now: w.now,
      eventsMaxLen: this.d.cfg.EVENTS_MAX_LEN,
      retentionMs: retentionAtEnd(this.d.cfg),
      entries: w.encoded,
      contextBytesDelta: w.contextBytesDelta,
      event: w.event,
      charge: w.charge ?? { steps: 0, tokens: 0 },
    });
  }

  /**
   * A key busy with the wait of a run that has ended is released and asked again (releaseIfHolderEnded): a run that
   * ended any way but through its wake job never blocks the key for the next.
   */
  async awaitEvent(w: EventWait & { runId: string }): Promise<AwaitReply> {
    const key = this.d.keys.eventKey(w.tenant, w.agent, w.key);
    const ask = () => awaitEvent(this.d.redis, key, { ...w, keepMs: this.d.cfg.EVENT_KEEP_MS });
    const r = await ask();
    if (r.kind !== 'busy' || !(await releaseIfHolderEnded(this.d, key))) return r;
    return ask();
  }

  settleEventWait(w: EventWait): Promise<SettleReply> {
    return settleEventWait(this.d.redis, this.d.keys.eventKey(w.tenant, w.agent, w.key), w);
  }

  /** The keys every fenced journal write of a step touches: the run, its budget, journal and events, the job's lock. */
  private journalKeys(job: StepJob, runId: string) {
    const k = this.d.keys.run(runId);
    return { run: k.run, budget: k.budget, journal: k.journal, events: k.events, jobLock: this.lockOf(runId, job) };
  }

  private commitKeys(job: StepJob, runId: string, approvalFor: string | undefined) {
    const k = this.d.keys.run(runId);
    return {
      ...this.journalKeys(job, runId),
      actions: k.actions,
      approvalAction: approvalFor ? this.d.keys.action(runId, approvalFor) : k.run,
      approvals: this.d.keys.approvals(this.d.keys.shardOf(runId)),
    };
  }

  textStream(job: StepJob, t: StreamTarget): TextStream | undefined {
    const { cfg } = this.d;
    if (!cfg.MODEL_STREAMING) return undefined;
    const k = this.d.keys.run(t.runId);
    return new TextStream({
      redis: this.d.redis,
      keys: { run: k.run, events: k.events, jobLock: this.lockOf(t.runId, job) },
      token: job.token,
      step: t.step,
      jobId: job.id,
      jobAttempt: job.attemptsStarted,
      jobInstance: job.timestamp,
      redelivered: t.redelivered,
      eventsMaxLen: cfg.EVENTS_MAX_LEN,
      flushMs: cfg.MODEL_STREAM_FLUSH_MS,
      flushChars: cfg.MODEL_STREAM_FLUSH_CHARS,
      startedEvent: t.startedEvent,
      metrics: this.d.metrics,
      log: t.log,
      ...(this.d.crash ? { crash: this.d.crash } : {}),
    });
  }
}
