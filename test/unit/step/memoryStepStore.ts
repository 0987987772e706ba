/**
 * The step's store in memory, for the stage tests (no Redis): the same fence as the
 * scripts (the job's lock token, the run's cursor and current job, a running run, no
 * second decision for a step), the same writes (journal, budget, cursor, status, the
 * next job), and a record of every call so a test can say what a stage wrote.
 */
import { FenceError } from '../../../src/core/errors.js';
import { decodeEntry, encodeEntry, entryDigest, packEntry, type JournalEntry } from '../../../src/core/journal.js';
import type { RunSpec, StepJobData } from '../../../src/runs/spec.js';
import type { RunState } from '../../../src/runs/store.js';
import type { CapturedAdd } from '../../../src/store/bullmqInternals.js';
import type {
  CommitReply,
  DecisionWrite,
  EventWait,
  ObservationWrite,
  StepCommit,
  StepStore,
  WakeWrite,
} from '../../../src/worker/step/store.js';
import type { StepJob } from '../../../src/worker/step/state.js';
import type { AwaitReply } from '../../../src/store/calls/awaitEvent.js';
import type { SettleReply } from '../../../src/store/calls/settleEventWait.js';

export interface MemoryRun {
  spec: RunSpec;
  state: RunState;
  /** The token that holds the current job's lock (what BullMQ's lock key would hold). */
  lock: string;
  journal: JournalEntry[];
  events: { type: string; data: unknown }[];
}

export class MemoryStepStore implements StepStore {
  readonly runs = new Map<string, MemoryRun>();
  /** Step jobs the commits added, in order. */
  readonly added: StepJobData[] = [];
  readonly ensured: string[] = [];
  readonly charged: { runId: string; step: number; tokens: number }[] = [];
  /** Wake jobs added after a park on a wait. */
  readonly wakeJobs: { data: StepJobData; atMs: number }[] = [];
  specReads = 0;
  /** Runs whose cached spec and transcript a stage let go of (`spec:<runId>`, `transcript:<runId>`). */
  readonly forgotten: string[] = [];

  /** A running run at step 1, its job `<runId>.s1` held with `lock`. */
  addRun(spec: RunSpec, lock = 'token-A'): MemoryRun {
    const run: MemoryRun = {
      spec,
      lock,
      journal: [],
      events: [],
      state: {
        status: 'running',
        reason: '',
        cursor: 1,
        decidedStep: 0,
        decisionIndex: 0,
        cancelRequested: false,
        jobId: `${spec.runId}.s1`,
        used: { steps: 0, tokens: 0, contextBytes: 0 },
        updatedAt: 0,
      },
    };
    this.runs.set(spec.runId, run);
    return run;
  }

  run(runId: string): MemoryRun {
    const run = this.runs.get(runId);
    if (!run) throw new Error(`no run ${runId} in the memory store`);
    return run;
  }

  async spec(runId: string): Promise<RunSpec | undefined> {
    this.specReads++;
    return this.runs.get(runId)?.spec;
  }

  forgetSpec(runId: string): void {
    this.forgotten.push(`spec:${runId}`);
  }

  async readState(runId: string): Promise<RunState | undefined> {
    const run = this.runs.get(runId);
    return run ? structuredClone(run.state) : undefined;
  }

  async journalEntry(runId: string, index: number): Promise<{ entry: JournalEntry; digest: string } | undefined> {
    const entry = this.runs.get(runId)?.journal[index];
    return entry ? { entry, digest: entryDigest(packEntry(encodeEntry(entry))) } : undefined;
  }

  async ensureCurrentStepJob(runId: string): Promise<void> {
    this.ensured.push(runId);
  }

  async cancelRequested(runId: string): Promise<boolean> {
    return this.run(runId).state.cancelRequested;
  }

  async transcript(runId: string): Promise<JournalEntry[]> {
    return [...(this.runs.get(runId)?.journal ?? [])];
  }

  forgetTranscript(runId: string): void {
    this.forgotten.push(`transcript:${runId}`);
  }

  /** The scripts' fence: lock token, run present and running, cursor and current job. */
  private fence(job: StepJob, runId: string, step: number): MemoryRun {
    const run = this.runs.get(runId);
    if (!run) throw new FenceError('run_missing', 'run missing');
    if (run.lock !== job.token) throw new FenceError('lock_lost', 'lock lost');
    if (run.state.cursor !== step || run.state.jobId !== job.id) throw new FenceError('stale_step', 'stale step');
    if (run.state.status !== 'running' && run.state.status !== 'queued')
      throw new FenceError('run_not_running', 'run not running');
    return run;
  }

  async journalDecision(job: StepJob, d: DecisionWrite): Promise<void> {
    const run = this.fence(job, d.runId, d.decision.step);
    if (run.state.decidedStep === d.decision.step) throw new FenceError('decision_exists', 'decision exists');
    if (d.startedEvent !== '') run.events.push({ type: 'step_started', data: JSON.parse(d.startedEvent) });
    run.journal.push(d.decision);
    run.state.decidedStep = d.decision.step;
    run.state.decisionIndex = run.journal.length - 1;
    run.state.used = grow(
      run.state.used,
      0,
      d.decision.usage.promptTokens + d.decision.usage.completionTokens,
      d.contextBytesDelta,
    );
  }

  async journalObservation(job: StepJob, w: ObservationWrite): Promise<void> {
    const run = this.fence(job, w.runId, w.observation.step);
    if (run.state.decidedStep !== w.observation.step) throw new Error('observation before its decision');
    run.journal.push(w.observation);
    run.state.used = grow(run.state.used, 0, 0, w.contextBytesDelta);
    run.events.push({ type: 'observation', data: { callId: w.observation.callId } });
  }

  async chargeTokens(job: StepJob, runId: string, step: number, tokens: number): Promise<void> {
    const run = this.fence(job, runId, step);
    run.state.used = grow(run.state.used, 0, tokens, 0);
    this.charged.push({ runId, step, tokens });
  }

  async commit(job: StepJob, c: StepCommit): Promise<CommitReply> {
    const run = this.fence(job, c.runId, c.step);
    const { plan } = c;
    if (plan.carriesDecision && run.state.decidedStep === c.step)
      throw new FenceError('decision_exists', 'decision exists');
    if (c.startedEvent !== '') run.events.push({ type: 'step_started', data: JSON.parse(c.startedEvent) });
    run.journal.push(...c.encoded.map((e, i) => decodeEntry(e, i)));
    run.state.used = grow(run.state.used, plan.stepsDelta, plan.tokensDelta, c.contextBytesDelta);
    // A recorded cancel wins over any status the plan asks for.
    const committed = run.state.cancelRequested ? 'cancelled' : plan.status;
    run.state.status = committed;
    run.state.reason = plan.reason;
    if (committed === 'running' && plan.advance && c.next) {
      run.state.cursor = c.step + 1;
      run.state.jobId = `${c.runId}.s${c.step + 1}`;
      this.added.push(c.next);
    } else if (plan.wait && committed === plan.status) {
      run.state.cursor = c.step + 1;
      run.state.jobId = `${c.runId}.s${c.step + 1}`;
      run.state.wait = plan.wait;
    }
    run.events.push({ type: 'step_committed', data: { step: c.step, status: plan.status } });
    job.completedBy(0, job.completion(c.fetchNext));
    return { committed };
  }

  async addWakeJob(data: StepJobData, atMs: number): Promise<void> {
    this.wakeJobs.push({ data, atMs });
  }

  async wake(job: StepJob, w: WakeWrite): Promise<boolean> {
    const run = this.runs.get(w.runId);
    if (!run) throw new FenceError('run_missing', 'run missing');
    if (run.lock !== job.token) throw new FenceError('lock_lost', 'lock lost');
    if (run.state.cursor !== w.step || run.state.jobId !== job.id) throw new FenceError('stale_step', 'stale step');
    if (run.state.status === 'running') return false;
    if (!['sleeping', 'waiting_event', 'waiting_child'].includes(run.state.status))
      throw new FenceError('run_not_running', 'run not parked on a wait');
    run.journal.push(...w.entries);
    run.state.used = grow(run.state.used, w.charge?.steps ?? 0, w.charge?.tokens ?? 0, w.contextBytesDelta);
    run.state.status = 'running';
    delete run.state.wait;
    run.events.push({ type: 'woke', data: JSON.parse(w.event) });
    return true;
  }

  /** Event keys as the scripts keep them (state, wait id, payload), by tenant and key. */
  readonly eventKeys = new Map<string, { state: string; waitId?: string; payload?: string }>();

  async awaitEvent(w: EventWait & { runId: string }): Promise<AwaitReply> {
    const k = `${w.tenant}/${w.key}`;
    const e = this.eventKeys.get(k);
    if (e?.waitId === w.waitId && (e.state === 'delivered' || e.state === 'consumed'))
      return { kind: 'delivered', payload: e.payload! };
    if (e?.waitId === w.waitId) return { kind: 'waiting' };
    if (e?.state === 'pending') {
      this.eventKeys.set(k, { state: 'consumed', waitId: w.waitId, payload: e.payload! });
      return { kind: 'delivered', payload: e.payload! };
    }
    if (e?.state === 'waiting' || e?.state === 'delivered') return { kind: 'busy' };
    this.eventKeys.set(k, { state: 'waiting', waitId: w.waitId });
    return { kind: 'waiting' };
  }

  async settleEventWait(w: EventWait): Promise<SettleReply> {
    const e = this.eventKeys.get(`${w.tenant}/${w.key}`);
    if (e?.waitId !== w.waitId) return { kind: 'timed_out' };
    if (e.state === 'delivered' || e.state === 'consumed') {
      e.state = 'consumed';
      return { kind: 'delivered', payload: e.payload! };
    }
    if (e.state === 'waiting' && w.now < w.at) return { kind: 'early' };
    e.state = 'timed_out';
    return { kind: 'timed_out' };
  }

  textStream(): undefined {
    return undefined;
  }
}

function grow(used: RunState['used'], steps: number, tokens: number, bytes: number | undefined): RunState['used'] {
  const next = { steps: used.steps + steps, tokens: used.tokens + tokens };
  return used.contextBytes === undefined ? next : { ...next, contextBytes: used.contextBytes + (bytes ?? 0) };
}

/** A job delivery in memory: what the stages see of BullMQ's Job, with its moves recorded. */
export class MemoryJob implements StepJob {
  delayedUntil: number | undefined;
  completed = false;
  readonly updates: StepJobData[] = [];

  constructor(
    readonly id: string,
    public data: unknown,
    readonly token = 'token-A',
    readonly attemptsStarted = 1,
    readonly attemptsMade = 0,
    readonly maxAttempts = 3,
  ) {}

  readonly timestamp = 1;

  async delay(untilMs: number): Promise<void> {
    this.delayedUntil = untilMs;
  }

  async updateData(data: StepJobData): Promise<void> {
    this.updates.push(data);
    this.data = data;
  }

  completion(): CapturedAdd {
    return { keys: [], argv: [] };
  }

  completedBy(): void {
    this.completed = true;
  }
}
