/**
 * Run state in Redis: creation (run + budget + first job, one script), reads
 * of the mutable state, the immutable spec (cached by workers), and the view.
 */
import { compactEndedRun, type Compacted } from './compact.js';
import type { RedisClient } from '../store/connect.js';
import { captureAddStandardJob } from '../store/bullmqInternals.js';
import { type KeySpace, stepJobId } from '../store/keys.js';
import { createRun, type CreateRunResult } from '../store/calls/createRun.js';
import { resumeRun, type ResumeResult } from '../store/calls/resumeRun.js';
import { decodeEntry, encodeEntry, type JournalEntry, type OperatorEntry } from '../core/journal.js';
import {
  LIMIT_FIELDS,
  limitsOfBudget,
  limitsSchema,
  runSpecSchema,
  type RunLimits,
  type RunSpec,
  unreadableSpecField,
  type StepJobData,
} from './spec.js';
import { type ShardQueues, STEP_JOB_NAME } from '../store/queues.js';
import { isWaitStatus, parseWait, waitIdOf, type WaitRecord } from './waits.js';
import { endsRun, type RunStatus } from '../core/status.js';
import { searchIndexKeysOf } from './search.js';
import { movedOnParentOf, type MovedOnParent } from './children.js';
import { newRunRecord, readBudget, readRun, readStatuses } from '../store/runRecord.js';
import { readJournal, readJournalEntry } from '../store/runJournal.js';
import { journalOperatorCall } from '../store/calls/journalOperator.js';

export interface RunState {
  status: RunStatus;
  reason: string;
  cursor: number;
  decidedStep: number;
  decisionIndex: number;
  cancelRequested: boolean;
  /** The run's current step job (only that job may commit). */
  jobId: string;
  used: StepJobData['used'];
  updatedAt: number;
  /** What a sleeping or waiting_event run waits for (src/runs/waits.ts). */
  wait?: WaitRecord;
}

/**
 * A run whose stored spec no longer parses: the field that does not (the first issue's path; `json` when it is not
 * JSON at all), a name, never a value.
 */
export interface UnreadableSpec {
  unreadableSpec: string;
}

export class RunStore {
  constructor(
    readonly redis: RedisClient,
    readonly keys: KeySpace,
    readonly queues: ShardQueues,
    private readonly eventsMaxLen: number,
    /** How long a subject's latest-run record lives (config SUBJECT_LINK_TTL_MS). */
    private readonly subjectTtlMs = 30 * 24 * 3600_000,
    /** Whether runs are indexed for search (src/runs/search.ts); off only in the bench's per-create comparison. */
    private readonly searchIndexed = true,
  ) {}

  /** Creates the run and step 1's job atomically. Returns false when nothing was created (see intake). */
  async create(spec: RunSpec, nowMs: number): Promise<boolean> {
    return (await this.intake(spec, nowMs)).outcome === 'created';
  }

  /**
   * Creates the run and step 1's job atomically, linked to the latest run of its subject
   * (tenant, agent, spec.key): the new run's `previousRunId`, the previous run's `nextRunId`.
   * A spec with an event (spec.event) is one run per event; one without joins the subject's
   * latest run when there is one (`joined`, nothing written). The same run again is `exists`.
   * `waitsForAdmission`: step 1's job waits in the delayed set until flow control admits the run.
   */
  async intake(spec: RunSpec, nowMs: number, waitsForAdmission = false): Promise<CreateRunResult> {
    const k = this.keys.run(spec.runId);
    const shard = this.keys.shardOf(spec.runId);
    const first: StepJobData = { v: 1, runId: spec.runId, step: 1, used: { steps: 0, tokens: 0, contextBytes: 0 } };
    const add = captureAddStandardJob(
      this.queues.byShard(shard),
      STEP_JOB_NAME,
      first,
      this.queues.jobOptions(spec.runId, 1),
    );
    const run = newRunRecord({
      tenant: spec.tenant,
      agent: spec.agent,
      key: spec.key,
      createdAt: spec.createdAt,
      updatedAt: nowMs,
      agentVersion: spec.agentVersion,
      toolsHash: spec.toolsHash,
      model: spec.model,
      jobId: stepJobId(spec.runId, 1),
      spec: JSON.stringify(spec),
      search: spec.search,
      // Indexed by what people know of it (src/runs/search.ts), in the same change as its creation.
      searchKeys: this.searchIndexed ? searchIndexKeysOf(this.keys, spec) : [],
    });
    const budget = { ...spec.limits, stepsUsed: 0, tokensUsed: 0, contextBytes: 0 };
    // Lua's cjson turns numbers into doubles (1.7e+12): send every field as a string.
    const strings = (o: Record<string, unknown>) =>
      Object.fromEntries(Object.entries(o).map(([f, v]) => [f, String(v)]));
    const subjectLatest = this.keys.subjectLatest(spec.tenant, spec.agent, spec.key);
    const keys = { run: k.run, budget: k.budget, events: k.events, runIndex: this.keys.runIndex(shard), subjectLatest };
    const args = {
      runId: spec.runId,
      now: nowMs,
      run,
      budget: strings(budget),
      // A child run's `created` event names its parent (the event stream shows the tree).
      event: JSON.stringify({
        runId: spec.runId,
        tenant: spec.tenant,
        ...(spec.parent ? { parentRunId: spec.parent.runId } : {}),
      }),
      eventsMaxLen: this.eventsMaxLen,
      mode: spec.event !== undefined ? ('event' as const) : ('subject' as const),
      subjectTtlMs: this.subjectTtlMs,
      firstJob: add,
      firstJobId: stepJobId(spec.runId, 1),
      // A run waiting for admission (flow control) has its job delayed to its deadline: admission promotes it;
      // if admission never comes, it starts then and ends on its wall clock, loudly, instead of waiting for ever.
      ...(waitsForAdmission ? { deferUntil: spec.limits.deadlineAt } : {}),
    };
    return createRun(this.redis, keys, args);
  }

  /**
   * The subject's latest-run record of a run (KeySpace.subjectLatest, on the run's shard), from the run's
   * tenant, agent and subject key: the scripts that bring a run back to work read it (includes/subject.lua).
   */
  async subjectLatestOf(runId: string): Promise<string> {
    const k = this.keys.run(runId);
    const run = await readRun(this.redis, this.keys, runId, ['tenant', 'agent', 'key']);
    // A run without them (its keys are gone) names a key that does not exist, on its own shard.
    if (!run) return `${k.run}:subject`;
    return this.keys.subjectLatest(run.tenant, run.agent, run.key);
  }

  /** Shrinks an ended run to what its readers need (src/runs/compact.ts); a run at work is left alone. */
  compactEnded(runId: string): Promise<Compacted> {
    return compactEndedRun(this.redis, this.keys, runId);
  }

  async exists(runId: string): Promise<boolean> {
    return (await this.redis.exists(this.keys.run(runId).run)) === 1;
  }

  async readSpec(runId: string): Promise<RunSpec | undefined> {
    const raw = (await readRun(this.redis, this.keys, runId, ['spec']))?.spec;
    return raw ? runSpecSchema.parse(JSON.parse(raw)) : undefined;
  }

  /**
   * What keeps the run from being put back to work for its place in a tree, or undefined (not a child, or its parent
   * still takes its outcome): the parent that took its outcome and moved on (src/runs/children.ts movedOnParentOf),
   * or the field at which its stored spec, which names the parent, no longer parses. Such a run could not run anyway
   * (its step would end it `failed` / `invalid_spec: <field>`): an operator's request on it is refused with that
   * field, never failed.
   */
  async parentBar(runId: string): Promise<MovedOnParent | UnreadableSpec | undefined> {
    let spec: RunSpec | undefined;
    try {
      spec = await this.readSpec(runId);
    } catch (err) {
      const field = unreadableSpecField(err);
      if (field !== undefined) return { unreadableSpec: field };
      throw err;
    }
    return movedOnParentOf(this.redis, this.keys, spec);
  }

  async readState(runId: string): Promise<RunState | undefined> {
    const [run, budget] = await Promise.all([
      readRun(this.redis, this.keys, runId, [
        'reason',
        'cursor',
        'decidedStep',
        'decisionIndex',
        'cancelRequested',
        'updatedAt',
        'jobId',
        'wait',
      ]),
      readBudget(this.redis, this.keys, runId, ['stepsUsed', 'tokensUsed', 'contextBytes', 'costUsed']),
    ]);
    if (!run) return undefined;
    const { wait, ...rest } = run;
    return {
      ...rest,
      ...(wait ? { wait: parseWait(wait) } : {}),
      used: {
        steps: budget.stepsUsed,
        tokens: budget.tokensUsed,
        ...(budget.costUsed > 0 ? { cost: budget.costUsed } : {}),
        ...(budget.contextBytes === undefined ? {} : { contextBytes: budget.contextBytes }),
      },
    };
  }

  /**
   * Records what a person did to the run: an `operator` journal entry (at the run's
   * cursor) and an `operator_action` event, in one script (journalOperator-3.lua: an ended
   * run's packed journal leaves no list, and the one the entry starts takes the run's TTL).
   * Called after the action itself took effect (its ledger history already names the
   * operator); if the process dies in between, the ledger history is the record and this one
   * is missing.
   */
  async recordOperatorAction(runId: string, entry: Omit<OperatorEntry, 'v' | 'kind' | 'step'>): Promise<void> {
    const cursor = (await readRun(this.redis, this.keys, runId, ['cursor']))?.cursor ?? 0;
    const full: OperatorEntry = { v: 1, kind: 'operator', step: cursor, ...entry };
    await journalOperatorCall(this.redis, this.keys.run(runId), {
      entry: encodeEntry(full),
      eventsMaxLen: this.eventsMaxLen,
      now: entry.at,
    });
  }

  /**
   * Journal reads go through src/store/runJournal.ts (an ended run's journal is packed) and are of bytes: an entry may
   * be stored compressed (packEntry), which no string decoding survives.
   */
  async journalEntry(runId: string, index: number): Promise<JournalEntry | undefined> {
    const raw = await readJournalEntry(this.redis, this.keys.run(runId), index);
    return raw === undefined ? undefined : decodeEntry(raw, index);
  }

  async transcript(runId: string): Promise<JournalEntry[]> {
    const raws = await readJournal(this.redis, this.keys.run(runId));
    return raws.map((r, i) => decodeEntry(r, i));
  }

  /**
   * Makes sure the job of the run's current step exists (a stale or duplicate
   * job's only duty). A no-op when it does (jobId dedupe while its hash exists)
   * or when the run is not running.
   */
  async ensureCurrentStepJob(runId: string): Promise<void> {
    const state = await this.readState(runId);
    if (!state) return;
    const waking = isWaitStatus(state.status) && state.wait !== undefined;
    if (!waking && state.status !== 'running' && state.status !== 'queued') return;
    const limits = await this.extendedLimits(runId);
    const data: StepJobData = {
      v: 1,
      runId,
      step: state.cursor,
      used: state.used,
      ...(state.jobId !== stepJobId(runId, state.cursor) ? { resume: true } : {}),
      ...(waking ? { wake: true } : {}),
      ...(limits ? { limits } : {}),
    };
    const delay = waking ? await this.wakeDelay(runId, state.wait!) : 0;
    await this.queues
      .forRun(runId)
      .add(STEP_JOB_NAME, data, { ...this.queues.jobOptions(runId, state.cursor), jobId: state.jobId, delay });
  }

  /**
   * A parked wait's job is its wake job, due at the wait's time; at once when the wait is for an event already
   * delivered (the delivery found no job to promote: its process died between the park and the job's add), or for
   * children that all ended (their promotion found no job for the same reason).
   */
  private async wakeDelay(runId: string, wait: WaitRecord): Promise<number> {
    const due = Math.max(0, wait.at - Date.now());
    if (due === 0 || wait.kind === 'sleep') return due;
    if (wait.kind === 'child') {
      const statuses = await readStatuses(
        this.redis,
        this.keys,
        wait.children.map((c) => c.runId),
      );
      return statuses.every((s) => s === undefined || endsRun(s)) ? 0 : due;
    }
    const run = await readRun(this.redis, this.keys, runId, ['tenant', 'agent']);
    if (!run?.tenant || !run.agent) return due;
    const [state, waitId] = await this.redis.hmget(
      this.keys.eventKey(run.tenant, run.agent, wait.key),
      'state',
      'waitId',
    );
    return state === 'delivered' && waitId === waitIdOf(runId, wait) ? 0 : due;
  }

  /**
   * The run's limits from its budget hash when an operator's retry extended them
   * (`extensions` counted by retryRun-17.lua), else undefined (the spec's hold).
   * A step job a resume or a sweep makes carries them, as the commits do.
   */
  async extendedLimits(runId: string): Promise<RunLimits | undefined> {
    const { extensions, ...limits } = await readBudget(this.redis, this.keys, runId, ['extensions', ...LIMIT_FIELDS]);
    if (extensions <= 0) return undefined;
    return limitsSchema.parse(limitsOfBudget(limits));
  }

  /**
   * Resumes a parked run at its cursor with a fresh job (`<runId>.s<step>.r<n>`),
   * only if it is still in `expectedStatus` (a second operator click is a no-op).
   * The resumed step reads its journalled decision and the ledger: nothing is redone. A run a later
   * run of its subject superseded is not resumed (`laterRunId`): one run at work per subject.
   */
  async resume(
    runId: string,
    expectedStatus: 'waiting_approval' | 'needs_human',
    nowMs = Date.now(),
  ): Promise<ResumeResult> {
    const state = await this.readState(runId);
    if (!state) return { resumed: false, status: 'missing' };
    if (state.status !== expectedStatus) return { resumed: false, status: state.status };
    // A child whose parent took its outcome and moved on is not resumed: what it spent after would be charged to
    // nobody. Read before the script (the parent is on another shard); what a race lets through ends at the child's
    // next step (src/worker/step/cancel.ts). Nor is a run whose stored spec no longer parses (no step could run it).
    const bar = await this.parentBar(runId);
    if (bar) return { resumed: false, status: state.status, ...bar };
    const k = this.keys.run(runId);
    const resumes = (await readRun(this.redis, this.keys, runId, ['resumes']))?.resumes ?? 0;
    const jobId = `${stepJobId(runId, state.cursor)}.r${resumes + 1}`;
    const limits = await this.extendedLimits(runId);
    const data: StepJobData = {
      v: 1,
      runId,
      step: state.cursor,
      used: state.used,
      resume: true,
      ...(limits ? { limits } : {}),
    };
    const add = captureAddStandardJob(this.queues.forRun(runId), STEP_JOB_NAME, data, {
      ...this.queues.jobOptions(runId, state.cursor),
      jobId,
    });
    const r = await resumeRun(
      this.redis,
      { run: k.run, events: k.events, subjectLatest: await this.subjectLatestOf(runId) },
      {
        runId,
        expectedStatus,
        jobId,
        now: nowMs,
        eventsMaxLen: this.eventsMaxLen,
        event: JSON.stringify({ status: 'running', reason: 'resumed', from: expectedStatus }),
        job: add,
      },
    );
    if (!('outcomeTakenBy' in r)) return r;
    // The parent's wake took the child's outcome after the read above (the child's mark, read by the script).
    const { outcomeTakenBy: parentRunId, ...rest } = r;
    return { ...rest, parentRunId, parentStatus: await this.parentStatusOf(parentRunId) };
  }

  /** A parent's status for an answer that names it (`missing` when it is gone). */
  async parentStatusOf(parentRunId: string): Promise<RunStatus | 'missing'> {
    return (await readRun(this.redis, this.keys, parentRunId, []))?.status ?? 'missing';
  }
}

/**
 * Worker-side cache of immutable run specs: read once per run per worker, let go of when a commit here stops or parks
 * the run (src/worker/step/commit.ts); the oldest goes first past `max`.
 */
export class RunSpecCache {
  private readonly specs = new Map<string, RunSpec>();

  constructor(
    private readonly store: RunStore,
    private readonly max = 5000,
  ) {}

  async get(runId: string): Promise<RunSpec | undefined> {
    const hit = this.specs.get(runId);
    if (hit) return hit;
    const spec = await this.store.readSpec(runId);
    if (spec) {
      if (this.specs.size >= this.max) {
        const oldest = this.specs.keys().next().value;
        if (oldest !== undefined) this.specs.delete(oldest);
      }
      this.specs.set(runId, spec);
    }
    return spec;
  }

  forget(runId: string): void {
    this.specs.delete(runId);
  }
}
