/**
 * One agent step = one BullMQ job (id `<runId>.s<step>`).
 *
 *   read state -> budget pre-flight -> model call (retried in code) ->
 *   [journal the decision, when a tool with an outside effect follows or this
 *    is a redelivery] -> tools (writes through the effect ledger) ->
 *   commit: journal entries + budget + cursor + next step's job, one script,
 *   fenced by this job's lock token and the run's cursor.
 *
 * If the process dies anywhere before the commit, the job is redelivered (stall
 * check) and the step starts again: a journalled decision is reused (the model
 * is not asked again), confirmed effects are answered from the ledger, and
 * dispatched-but-unconfirmed ones are reconciled. If it dies after the commit,
 * the redelivered job is stale: the fence refuses it and it only makes sure the
 * run's current step job exists.
 */
import type { Context, Tracer } from '@opentelemetry/api';
import { traced } from '../metrics/tracing.js';
import { DelayedError, type Job } from 'bullmq';
import { NotReplicatedError } from '../store/replicated.js';
import { z } from 'zod';
import type { Logger } from 'pino';
import { AgentError, errorCode, FenceError, InvalidStepInput, RetryableError, ShutdownError, TerminalError } from '../core/errors.js';
import { DeadlineError, withDeadlineScope } from '../core/timeout.js';
import { encodeEntry, estimateTokens, usageSchema, type DecisionEntry, type JournalEntry, type ObservationEntry, type Usage } from '../core/journal.js';
import { TranscriptCache } from '../runs/transcriptCache.js';
import { countRunFinished, type Metrics } from '../metrics/metrics.js';
import type { ModelProvider, ModelTurn } from '../core/model.js';
import { withRetry } from '../core/withRetry.js';
import type { Agent, AgentCatalog } from '../core/agent.js';
import type { ToolContext } from '../core/tool.js';
import { stepJobDataSchema, type RunLimits, type RunSpec, type StepJobData } from '../runs/spec.js';
import type { RedisClient } from '../store/connect.js';
import { captureAddStandardJob, captureMoveToCompleted, completeFromCommit } from '../store/bullmqInternals.js';
import { isScriptError } from '../store/codes.js';
import { KeySpace, stepJobId } from '../store/keys.js';
import { commitStep } from '../store/calls/commitStep.js';
import { chargeTokens } from '../store/calls/chargeTokens.js';
import { journalDecision } from '../store/calls/journalDecision.js';
import { RunSpecCache, RunStore } from '../runs/store.js';
import { STEP_JOB_NAME } from '../runs/queues.js';
import {
  attemptCheck, BudgetStopError, estimateCallTokens, isContext, preflight, spentCheck, TenantBudget, wallClockStop, type BudgetKind, type BudgetStop, type Used,
} from '../budget/tenantBudget.js';
import { nextStatus } from '../budget/policy.js';
import type { CrashPoints } from '../config/testHooks.js';
import type { EffectRunner } from './effects.js';
import type { VersionGate, VersionVerdict } from './versionGate.js';
import { TextStream } from './textStream.js';
import { FollowUps, followUpTokens } from './followUp.js';
import type { RateLimits } from '../flow/rateLimits.js';
import { RateLimitWait, ratedAttempt, waitForRate } from '../flow/rateWait.js';

/**
 * What a step reads of the configuration, and nothing else (src/server passes the
 * process's Config, which has every field; defaults are in src/config/config.ts).
 */
export interface StepOptions {
  /** Completion tokens asked of the model per call; part of every attempt's estimate. */
  readonly COMPLETION_TOKEN_CAP: number;
  /** Attempts of one model call (retryable failures only), backoff from RETRY_BASE_MS capped at RETRY_MAX_MS. */
  readonly MODEL_MAX_ATTEMPTS: number;
  readonly RETRY_BASE_MS: number;
  readonly RETRY_MAX_MS: number;
  /** How long a model outage may last, from its first failure, before the run parks needs_human / provider_unavailable (ms). */
  readonly MODEL_OUTAGE_MAX_MS: number;
  /** Cap of a run's event stream. */
  readonly EVENTS_MAX_LEN: number;
  /** How long a finished run's keys live, in ms. */
  readonly RUN_RETENTION_MS: number;
  /** How long a pending approval waits before it expires, in ms. */
  readonly APPROVAL_TTL_MS: number;
  /** Per-tenant token budget per UTC day (0 = none). */
  readonly TENANT_DAILY_TOKENS: number;
  /** Stream answer text to the run's events (text_delta, step_restarted), batched by time or size (src/worker/textStream.ts). */
  readonly MODEL_STREAMING: boolean;
  readonly MODEL_STREAM_FLUSH_MS: number;
  readonly MODEL_STREAM_FLUSH_CHARS: number;
  /** How long a follow-up's first step is delayed, each time, while the previous run of its subject is queued or running (ms). */
  readonly FOLLOW_UP_WAIT_MS: number;
}

export interface StepDeps {
  cfg: StepOptions;
  redis: RedisClient;
  keys: KeySpace;
  store: RunStore;
  specs: RunSpecCache;
  /** The agents this worker runs: a run's spec names its agent. */
  agents: AgentCatalog;
  /** The versions this worker serves and the registry of those others serve; without it, the catalog's versions (no hand-back). */
  versions?: VersionGate;
  providers: Map<string, ModelProvider>;
  effects?: EffectRunner;
  metrics: Metrics;
  log: Logger;
  crash: CrashPoints;
  transcripts?: TranscriptCache;
  now?: () => number;
  /** Spans per step, model call and effect (src/metrics/tracing.ts); none when undefined. */
  tracer?: Tracer | undefined;
  /** Names this process in run events (`worker:<pid>` by default). */
  workerName?: string;
  /** Flow control: a run that stops or parks gives its slot back (src/flow/admission.ts). */
  admission?: { release(runId: string): Promise<void> } | undefined;
  /** Model rate limits, reserved around each model attempt (src/flow/rateLimits.ts). */
  rates?: RateLimits | undefined;
}

type Terminal = { status: string; reason: string };

/**
 * A model call's result: a decision, the stop it ends in, or a provider outage to wait out
 * (`retryAfterMs`: what the provider asked, if it did), with the tokens its attempts spent.
 */
type Called =
  | { decision: DecisionEntry }
  | { failed: Terminal; charged: number; budget?: BudgetKind }
  | { unavailable: { provider: string; retryAfterMs: number | undefined }; charged: number }
  | { throttled: RateLimitWait; charged: number };

/** A provider named its wait (Retry-After): not retried in this delivery (withRetry passes it through), the job is delayed. */
class NamedWait extends AgentError {
  constructor(readonly retryable: RetryableError) {
    super('transient', retryable.message, retryable.details);
  }
}

/** What a model call may spend: `tokens` (from the byte bound, or exact), and `exact` while it is the bound. */
interface Estimate {
  tokens: number;
  exact?: (() => Promise<number>) | undefined;
}

/**
 * A budget check (`check(tokens)`: a stop, or undefined) on the estimate; a stop of the
 * byte bound is checked again on the exact count, which then replaces the bound.
 */
async function exactIfRefused(
  estimate: Estimate, check: (tokens: number) => BudgetStop | undefined | Promise<BudgetStop | undefined>,
): Promise<BudgetStop | undefined> {
  const stop = await check(estimate.tokens);
  if (stop === undefined || !estimate.exact || (stop.kind !== 'tokens' && stop.kind !== 'tenant_tokens')) return stop;
  estimate.tokens = await estimate.exact();
  estimate.exact = undefined;
  return check(estimate.tokens);
}

/** Usage with the transcript's byte count grown by `bytes` (left unknown when it was). */
function grown(used: Used, bytes: number): Used {
  return used.contextBytes === undefined ? { steps: used.steps, tokens: used.tokens } : { ...used, contextBytes: used.contextBytes + bytes };
}

interface CommitPlan {
  entries: JournalEntry[];
  carriesDecision: boolean;
  status: string;
  reason: string;
  stepsDelta: number;
  tokensDelta: number;
  advance: boolean;
  /** A park into waiting_approval: the action whose approval the commit records. */
  approvalFor?: string;
}

export class StepProcessor {
  private readonly transcripts: TranscriptCache;
  /**
   * The agent's prompt text and its token count, once per run: a run's input never
   * changes and its spec object is cached (RunSpecCache), so a step does not parse
   * the input and run the tokenizer again (that was a fifth of a read step's CPU).
   */
  private readonly prompts = new WeakMap<RunSpec, { instructions: string; prompt: string; inputTokens: number }>();
  /** Tokenizer counts of journal entries, when a budget check needs the transcript's exact size. */
  private readonly entryTokens = new WeakMap<JournalEntry, number>();
  private readonly extended = new WeakMap<RunSpec, RunSpec>();
  private readonly now: () => number;
  private readonly tenantBudget: TenantBudget;
  private readonly workerName: string;
  private readonly followUps: FollowUps;

  constructor(private readonly d: StepDeps) {
    this.followUps = new FollowUps(d.store);
    this.tenantBudget = new TenantBudget(d.redis, d.keys, d.cfg.TENANT_DAILY_TOKENS);
    this.transcripts = d.transcripts ?? new TranscriptCache();
    this.now = d.now ?? Date.now;
    this.workerName = d.workerName ?? `worker:${process.pid}`;
  }

  /**
   * @param signal aborted at SIGTERM: model calls, reads and waits stop; the job is handed back.
   * @param dispatchSignal aborted when the grace period ends: a write in flight is cut off
   *   (the ledger keeps it dispatched; the next owner reconciles it).
   * @param fetchNext asked at commit time: whether the commit, which also completes this job,
   *   should fetch the worker's next job (BullMQ's worker then takes it from `job.moveToCompleted`).
   */
  async process(
    job: Job, token: string, signal: AbortSignal, dispatchSignal: AbortSignal = signal, fetchNext: () => boolean = () => false,
  ): Promise<void> {
    const attributes = () => {
      const raw = job.data as Partial<StepJobData>;
      return { 'agent.run_id': String(raw.runId), 'agent.step': Number(raw.step), 'agent.job_id': String(job.id), 'agent.attempt': job.attemptsStarted };
    };
    return traced(this.d.tracer, { name: 'agent.step', attributes }, (trace) => this.processStep(job, token, signal, dispatchSignal, fetchNext, trace));
  }

  private async processStep(
    job: Job, token: string, signal: AbortSignal, dispatchSignal: AbortSignal, fetchNext: () => boolean, trace: Context | undefined,
  ): Promise<void> {
    const started = process.hrtime.bigint();
    const startedAt = this.now();
    const parsed = stepJobDataSchema.safeParse(job.data);
    if (!parsed.success) throw new InvalidStepInput('invalid_job_data', fieldOf(parsed.error), { cause: parsed.error });
    const data = parsed.data;
    const { runId, step } = data;
    const log = lazyChild(this.d.log, { runId, step, jobId: job.id, attempt: job.attemptsStarted });
    this.d.metrics.stepsStarted.inc();
    const lockKey = this.d.keys.jobLock(this.d.keys.shardOf(runId), job.id!);

    const readSpec = () => this.d.specs.get(runId).catch((err: unknown) => {
      if (err instanceof SyntaxError || err instanceof z.ZodError) throw new InvalidStepInput('invalid_spec', err instanceof z.ZodError ? fieldOf(err) : 'json', { cause: err });
      throw err;
    });
    const cached = await readSpec();
    if (!cached) {
      log.warn({ code: 'run_missing' }, 'step for an unknown run: dropped');
      return;
    }
    // A run an operator continued under another version is re-pinned in Redis while this cache may hold
    // its old pin: a spec this worker would not run is read again once before any verdict on it.
    let refreshed: RunSpec | undefined;
    if (!this.agentFor(cached)) {
      this.d.specs.forget(runId);
      refreshed = await readSpec();
    }
    // Limits an operator extended (a retry) travel in the step job: the cached spec has the ones it was created with.
    const spec = this.withLimits(refreshed ?? cached, data.limits);

    // First delivery of a job created by the previous commit: the job carries the
    // budget usage as of that commit, and no decision for this step can exist yet
    // (the commit script refuses if one does). Any redelivery reads the state.
    const redelivered = data.resume === true || job.attemptsStarted > 1 || job.attemptsMade > 0;
    let used: Used = data.used;
    let journalled: DecisionEntry | undefined;
    if (redelivered) {
      const state = await this.d.store.readState(runId);
      if (!state) return;
      if (state.cursor !== step || state.jobId !== job.id || (state.status !== 'running' && state.status !== 'queued')) {
        log.info({ code: 'stale_step', cursor: state.cursor, status: state.status }, 'stale step job');
        this.d.metrics.fenceRejections.inc({ code: 'stale_step' });
        await this.d.store.ensureCurrentStepJob(runId);
        return;
      }
      used = state.used;
      if (state.decidedStep === step) {
        const entry = await this.d.store.journalEntry(runId, state.decisionIndex);
        if (entry?.kind === 'decision' && entry.step === step) journalled = entry;
      }
    }

    // The step_started event rides in the first script this delivery runs: journalDecision, or else the commit.
    const startedEvent = JSON.stringify({ step, jobId: job.id, attempt: job.attemptsStarted, startedAt, worker: this.workerName });
    let startedEmitted = false;
    const commit = (plan: CommitPlan) => this.commit(job, token, lockKey, data, used, plan, log, fetchNext(), startedEmitted ? '' : startedEvent);

    try {
      // The run's agent at its pinned version and tools hash: a worker that does not serve it hands the
      // step back to one that does (side-by-side versions), or parks the run for a person (src/worker/versionGate.ts).
      const agent = this.agentFor(spec);
      if (!agent) {
        await this.notServed(job, token, spec, (reason) => commit(this.stopPlan(step, { status: 'needs_human', reason }, [], false)), log);
        return;
      }

      let decision = journalled;
      let carriesDecision = false;
      if (!decision) {
        // A follow-up's model sees the previous conversation, read once the previous run is no longer at work.
        const followUp = await this.followUps.context(agent, spec);
        if ('waitingFor' in followUp) {
          await this.waitForPrevious(job, token, spec, step, followUp.waitingFor, commit, log);
          return;
        }
        // What one attempt may spend: the same for every attempt of this call (the transcript does not change between them).
        const estimate = await this.estimateOf(agent, spec, used);
        const stop = await exactIfRefused(estimate, (tokens) => preflight(spec, used, tokens, this.now()));
        if (stop) {
          this.d.metrics.budgetStops.inc({ kind: stop.kind });
          log.warn({ code: 'budget_exceeded', kind: stop.kind }, stop.reason);
          await commit(this.stopPlan(step, { status: 'budget_exceeded', reason: stop.reason }, [], false));
          return;
        }
        // Each attempt is checked before (what it may spend) and charged after (what it did), tenant day included.
        const chargeAbandoned = (tokens: number) => this.chargeAbandoned(job, token, lockKey, step, tokens, log);
        const stream = this.textStream(job, token, lockKey, step, startedEvent, redelivered, log);
        const called = await this.callModel(agent, spec, step, used, estimate, signal, log, trace, chargeAbandoned, stream)
          .finally(() => void (startedEmitted ||= stream?.startedEmitted === true));
        if ('throttled' in called) {
          await waitForRate(this.d, { job, token, data, spec, wait: called.throttled, charged: called.charged, now: this.now() }, {
            chargeAbandoned, stop: (reason) => commit({ ...this.stopPlan(step, { status: 'budget_exceeded', reason }, [], false), tokensDelta: called.charged }), log,
          });
          return;
        }
        if ('unavailable' in called) {
          await this.waitOutOutage(job, token, data, spec, called.unavailable, called.charged, chargeAbandoned, commit, log);
          return;
        }
        if ('failed' in called) {
          if (called.budget) {
            this.d.metrics.budgetStops.inc({ kind: called.budget });
            log.warn({ code: 'budget_exceeded', kind: called.budget }, called.failed.reason);
          }
          await commit({ ...this.stopPlan(step, called.failed, [], false), tokensDelta: called.charged });
          return;
        }
        decision = called.decision;
        const hasWrite = decision.toolCalls.some((c) => agent.tools.get(c.name)?.effect === 'write');
        if (hasWrite || redelivered) {
          const bytes = await this.journalDecision(job, token, lockKey, decision, log, startedEmitted ? '' : startedEvent, used);
          startedEmitted = true;
          used = grown({ ...used, tokens: used.tokens + total(decision.usage) }, bytes);
          this.d.crash.hit('after_decision', step);
        } else {
          carriesDecision = true;
        }
      } else {
        log.info({ code: 'decision_replayed' }, 'reusing the journalled decision');
      }

      const ctx: ToolContext = { runId, step, signal, trace, input: spec.input };
      const observations: ObservationEntry[] = [];
      // The run's deadline bounds the tools too: none starts past it, none waits past it (the calls not run are dropped).
      let wallStop: BudgetStop | undefined;
      for (const call of decision.toolCalls) {
        if (signal.aborted) throw new ShutdownError();
        if (this.now() >= spec.limits.deadlineAt) {
          wallStop = wallClockStop(spec, this.now());
          break;
        }
        let result: Awaited<ReturnType<StepProcessor['runTool']>>;
        try {
          result = await this.runTool(agent, call, ctx, spec, log, dispatchSignal);
        } catch (err) {
          if (!(err instanceof DeadlineError) || signal.aborted) throw err;
          wallStop = wallClockStop(spec, this.now(), err.cause !== undefined);
          break;
        }
        if ('park' in result) {
          // A write was requested, so the decision is already journalled: park at this step
          // (a park into waiting_approval records the approval request in the same commit).
          await commit({ ...this.stopPlan(step, result.park, observations, false), ...(result.approvalFor ? { approvalFor: result.approvalFor } : {}) });
          return;
        }
        observations.push(result.obs);
      }

      const entries: JournalEntry[] = carriesDecision ? [decision, ...observations] : [...observations];
      const { status, reason, budget } = nextStatus(spec, used, decision, wallStop);
      if (budget) this.d.metrics.budgetStops.inc({ kind: budget });
      if (budget === 'wall_clock') log.warn({ code: 'budget_exceeded', kind: budget }, reason);
      if (status !== 'running') entries.push({ v: 1, kind: 'status', step, status, reason });
      await commit({
        entries, carriesDecision, status, reason, stepsDelta: 1,
        tokensDelta: carriesDecision ? total(decision.usage) : 0, advance: true,
      });
      this.d.metrics.stepDuration.observe(Number(process.hrtime.bigint() - started) / 1e9);
      log.debug({ code: 'step_committed', status }, 'step committed');
    } catch (err) {
      if (err instanceof DelayedError) throw err; // waiting out a provider outage or a previous run: the job is in the delayed set
      if (err instanceof NotReplicatedError && !signal.aborted) {
        // Nothing was sent (the action is safe_retry): wait for the replicas without spending an attempt.
        log.warn({ code: err.code, ...err.details }, 'replicas behind: step delayed');
        await job.moveToDelayed(this.now() + err.retryAfterMs, token);
        throw new DelayedError();
      }
      if (err instanceof FenceError) {
        this.d.metrics.fenceRejections.inc({ code: err.code });
        log.info({ code: err.code }, 'commit refused by the fence');
        if (err.code !== 'lock_lost') await this.d.store.ensureCurrentStepJob(runId);
        if (err.code === 'decision_exists') throw err; // redelivered: the slow path reuses the decision
        return;
      }
      if (signal.aborted) throw err;
      const lastAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
      const code = err instanceof AgentError ? err.code : 'step_error';
      log.error({ code, err, lastAttempt }, 'step failed');
      if (lastAttempt) {
        // The reason is a code, never the error's text (it may quote customer data). If this stop
        // cannot be committed, the job fails and the failed event (or the sweep) ends the run.
        await commit(this.stopPlan(step, { status: 'failed', reason: `step_error: ${errorCode(err)}` }, [], false))
          .catch((commitErr: unknown) => {
            log.error({ code: 'stop_commit_failed', err: commitErr }, 'could not commit the failed status');
            throw err;
          });
        return;
      }
      throw err;
    }
  }

  /** The agent that runs `spec` on this worker, or undefined (another version, tools hash or agent, or a version not served). */
  private agentFor(spec: RunSpec): Agent | undefined {
    if (this.d.versions) return this.d.versions.agentFor(spec);
    const agent = this.d.agents.get(spec.agent);
    return agent && agent.version === spec.agentVersion && agent.tools.schemaHash === spec.toolsHash ? agent : undefined;
  }

  /**
   * A step this worker does not serve. Handed back (moveToDelayed + DelayedError: no attempt is
   * counted, nothing was written) while another live worker announces the run's version; else the
   * run parks needs_human with a reason of codes and versions only (`version_mismatch: ...`, the
   * version queue, or `unknown_agent: <name>`). If the process dies before the move, the stall check
   * redelivers the job and the verdict is made again.
   */
  private async notServed(job: Job, token: string, spec: RunSpec, park: (reason: string) => Promise<void>, log: Logger): Promise<void> {
    const verdict: VersionVerdict = this.d.versions
      ? await this.d.versions.verdict(spec)
      : this.d.agents.get(spec.agent)
        ? { kind: 'park', reason: `version_mismatch: pinned ${spec.agentVersion}/${spec.toolsHash} served none` }
        : { kind: 'park', reason: `unknown_agent: ${spec.agent}` };
    if (verdict.kind === 'hand_back') {
      await job.moveToDelayed(this.now() + verdict.delayMs, token);
      this.d.metrics.versionHandbacks.inc({ agent: spec.agent });
      log.info({ code: 'version_hand_back', agent: spec.agent, version: spec.agentVersion, delayMs: verdict.delayMs }, 'another worker serves this version: step handed back');
      throw new DelayedError();
    }
    log.warn({ code: reasonCodeOf(verdict.reason), agent: spec.agent, version: spec.agentVersion, toolsHash: spec.toolsHash }, 'no live worker serves the run\'s version: parked for a person');
    await park(verdict.reason);
  }

  private stopPlan(step: number, t: Terminal, observations: ObservationEntry[], countStep: boolean): CommitPlan {
    return {
      entries: [...observations, { v: 1, kind: 'status', step, status: t.status, reason: t.reason }],
      carriesDecision: false, status: t.status, reason: t.reason,
      stepsDelta: countStep ? 1 : 0, tokensDelta: 0, advance: false,
    };
  }

  /**
   * The spec with the limits an operator's retry set (carried by the job), one object per
   * (spec, limits) so the caches keyed by the spec object (promptOf, follow-ups) keep hitting;
   * the spec itself when there are none.
   */
  private withLimits(spec: RunSpec, limits: RunLimits | undefined): RunSpec {
    if (!limits) return spec;
    const hit = this.extended.get(spec);
    if (hit && sameLimits(hit.limits, limits)) return hit;
    const derived = { ...spec, limits };
    this.extended.set(spec, derived);
    return derived;
  }

  /**
   * A follow-up's previous conversation (FollowUps, read before the first promptOf of the run's
   * spec) goes before the first message, and its tokens into every estimate of the run.
   */
  private promptOf(agent: Agent, spec: RunSpec): { instructions: string; prompt: string; inputTokens: number } {
    let p = this.prompts.get(spec);
    if (!p) {
      const previous = this.followUps.known(spec);
      const prompt = agent.prompt(spec.input);
      p = previous === ''
        ? { instructions: agent.instructions(spec.input), prompt, inputTokens: agent.estimateInputTokens(spec.input) }
        : { instructions: agent.instructions(spec.input), prompt: `${previous}\n\n${prompt}`, inputTokens: agent.estimateInputTokens(spec.input) + followUpTokens(previous) };
      this.prompts.set(spec, p);
    }
    return p;
  }

  /**
   * A follow-up whose previous run is still queued or running waits: its step job goes to the
   * delayed set for FOLLOW_UP_WAIT_MS (no worker holds it) and asks again. The wait is bounded by
   * the follow-up's own deadline: one that would end at or past it stops the run `budget_exceeded`
   * (wall_clock), with its status, event and metric, by the commit. Nothing was sent to the model.
   * A cancel requested meanwhile ends it at once (cancelled), nothing sent either.
   */
  private async waitForPrevious(
    job: Job, token: string, spec: RunSpec, step: number, previousStatus: string, commit: (plan: CommitPlan) => Promise<void>, log: Logger,
  ): Promise<void> {
    const now = this.now();
    const waitMs = this.d.cfg.FOLLOW_UP_WAIT_MS;
    // A cancel waits for the run's next commit: a waiting follow-up commits now (the commit sets `cancelled`
    // with the cancel's reason), instead of when the previous run ends and after a model call.
    if ((await this.d.redis.hget(this.d.keys.run(spec.runId).run, 'cancelRequested')) === '1') {
      log.info({ code: 'follow_up_cancelled', previousRunId: spec.previousRunId }, 'cancelled while waiting for the previous run');
      await commit(this.stopPlan(step, { status: 'cancelled', reason: 'cancelled while waiting for the previous run' }, [], false));
      return;
    }
    if (now + waitMs >= spec.limits.deadlineAt) {
      const stop = wallClockStop(spec, now, true);
      this.d.metrics.budgetStops.inc({ kind: stop.kind });
      log.warn({ code: 'budget_exceeded', kind: stop.kind, previousRunId: spec.previousRunId, previousStatus }, stop.reason);
      await commit(this.stopPlan(step, { status: 'budget_exceeded', reason: `${stop.reason} waiting for the previous run ${spec.previousRunId}` }, [], false));
      return;
    }
    await job.moveToDelayed(now + waitMs, token);
    this.d.metrics.followUpWaits.inc();
    log.info({ code: 'follow_up_wait', previousRunId: spec.previousRunId, previousStatus, waitMs }, 'previous run still at work: follow-up delayed');
    throw new DelayedError();
  }

  /**
   * What the step's model call may spend. From the transcript's byte bound when the run
   * keeps one (free: no tokenizer on the step's path), with `exact` to count it instead;
   * a budget check the bound fails is asked again of the exact count, so a run stops
   * exactly where counting every entry would stop it, and the tokenizer runs only then.
   */
  private async estimateOf(agent: Agent, spec: RunSpec, used: Used): Promise<Estimate> {
    const withContext = (contextTokens: number) =>
      estimateCallTokens(this.promptOf(agent, spec).inputTokens, contextTokens, this.d.cfg.COMPLETION_TOKEN_CAP, agent.tools.specs);
    const exact = async () => withContext(await this.contextTokens(spec.runId));
    // A run from before the byte count was kept: counted exactly at every step.
    if (used.contextBytes === undefined) return { tokens: await exact() };
    return { tokens: withContext(used.contextBytes), exact };
  }

  /** The transcript's tokens, by the tokenizer: each entry counted once per worker (the transcript cache keeps the entries). */
  private async contextTokens(runId: string): Promise<number> {
    const entries = await this.transcripts.load(this.d.redis, runId, this.d.keys.run(runId).journal);
    let n = 0;
    for (const e of entries) {
      if (!isContext(e.kind)) continue;
      let t = this.entryTokens.get(e);
      if (t === undefined) this.entryTokens.set(e, (t = estimateTokens(encodeEntry(e))));
      n += t;
    }
    return n;
  }

  /** This delivery's streamed answer text, when MODEL_STREAMING is on. */
  private textStream(job: Job, token: string, lockKey: string, step: number, startedEvent: string, redelivered: boolean, log: Logger): TextStream | undefined {
    if (!this.d.cfg.MODEL_STREAMING) return undefined;
    const k = this.d.keys.run((job.data as StepJobData).runId);
    return new TextStream({
      redis: this.d.redis, keys: { run: k.run, events: k.events, jobLock: lockKey }, token, step, jobId: job.id!, jobAttempt: job.attemptsStarted, jobInstance: job.timestamp, redelivered,
      eventsMaxLen: this.d.cfg.EVENTS_MAX_LEN, flushMs: this.d.cfg.MODEL_STREAM_FLUSH_MS, flushChars: this.d.cfg.MODEL_STREAM_FLUSH_CHARS,
      startedEvent, metrics: this.d.metrics, log,
    });
  }

  private async callModel(
    agent: Agent, spec: RunSpec, step: number, used: Used, estimate: Estimate, signal: AbortSignal, log: Logger, trace: Context | undefined, chargeAbandoned: (tokens: number) => Promise<void>,
    stream: TextStream | undefined,
  ): Promise<Called> {
    return traced(this.d.tracer, {
      name: 'agent.model', parent: trace,
      attributes: () => ({ 'agent.run_id': spec.runId, 'agent.step': step, 'agent.model': spec.model, 'agent.model_id': spec.modelId ?? '' }),
      outcome: (r: Called) => ('failed' in r
        ? { 'agent.outcome': r.failed.status, 'agent.tokens': r.charged }
        : 'unavailable' in r ? { 'agent.outcome': 'provider_unavailable', 'agent.tokens': r.charged }
        : 'throttled' in r ? { 'agent.outcome': 'rate_limited', 'agent.tokens': r.charged }
        : { 'agent.outcome': 'decided', 'agent.tokens': total(r.decision.usage), 'agent.tools': r.decision.toolCalls.map((c) => c.name) }),
    }, () => this.decide(agent, spec, step, used, estimate, signal, log, chargeAbandoned, stream));
  }

  /**
   * The step's model call, retried in code. Before each attempt: the deadline
   * and what it may spend (run and tenant day); after it: what it did spend,
   * failed attempts included (their billed usage). Each attempt waits at most
   * until the run's deadline, and no backoff is slept past it. Handed back at
   * SIGTERM, the step charges what its failed attempts spent (chargeAbandoned).
   */
  private async decide(
    agent: Agent, spec: RunSpec, step: number, used: Used, estimate: Estimate, signal: AbortSignal, log: Logger, chargeAbandoned: (tokens: number) => Promise<void>,
    stream: TextStream | undefined,
  ): Promise<Called> {
    const provider = this.d.providers.get(spec.model);
    if (!provider) return { failed: { status: 'failed', reason: `model_unavailable: ${spec.model}` }, charged: 0 };
    const usage: Usage = { promptTokens: 0, completionTokens: 0 };
    let attempts = 0;
    const labels = { tenant: spec.tenant, provider: provider.name };
    this.d.metrics.modelCalls.inc(labels);
    const transcript = provider.needsTranscript
      ? await this.transcripts.load(this.d.redis, spec.runId, this.d.keys.run(spec.runId).journal)
      : undefined;
    const { deadlineAt } = spec.limits;
    // The agent's prompt text and, for the scripted provider, its turns (the run's own script first).
    const { instructions, prompt } = this.promptOf(agent, spec);
    const script = spec.script ?? agent.demoScript?.(spec.input);
    let turn: ModelTurn;
    try {
      turn = await withRetry(
        { maxAttempts: this.d.cfg.MODEL_MAX_ATTEMPTS, baseMs: this.d.cfg.RETRY_BASE_MS, maxMs: this.d.cfg.RETRY_MAX_MS },
        async (attempt) => {
          attempts = attempt;
          const stop = await exactIfRefused(estimate, (tokens) => attemptCheck(spec, used.tokens + total(usage), tokens, this.now()));
          if (stop) throw new BudgetStopError(stop);
          // The model's rate limit: one request and the estimate, or a RateLimitWait (nothing reserved).
          const rated = await ratedAttempt(this.d.rates, spec, provider.name, estimate.tokens, this.now());
          const tenantStop = await exactIfRefused(estimate, (tokens) => this.tenantBudget.reserve(spec.tenant, tokens, this.now()));
          if (tenantStop) {
            await rated?.settle(0);
            throw new BudgetStopError(tenantStop);
          }
          let spent = 0;
          // Streamed text of this attempt: all of it is written before the decision can be (end(true)).
          const streamed = stream?.attempt(attempt);
          try {
            const t = await withDeadlineScope(deadlineAt, signal, (attemptScope) => provider.complete({
              runId: spec.runId, step, attempt, instructions, prompt, tools: agent.tools.specs,
              // The run's pinned model; its maxOutputTokens may only lower the deployment's cap (the pre-flight counts the cap).
              model: spec.modelId, options: spec.modelOptions,
              maxCompletionTokens: Math.min(this.d.cfg.COMPLETION_TOKEN_CAP, spec.modelOptions?.maxOutputTokens ?? Infinity), script,
              ...(transcript ? { transcript } : {}), ...(streamed ? { onTextDelta: streamed.push } : {}),
              get signal() {
                return attemptScope.signal;
              },
            }), this.now).then(
              async (answer) => (await streamed?.end(true), answer),
              async (err: unknown) => { await streamed?.end(false); throw err; },
            );
            if (t.usage) {
              const u = validUsage(t.usage);
              spent = total(u);
              addUsage(usage, u);
            }
            this.d.metrics.modelAttempts.inc({ ...labels, outcome: 'ok' });
            return t;
          } catch (err) {
            this.d.metrics.modelAttempts.inc({ ...labels, outcome: err instanceof RetryableError ? 'retryable' : 'error' });
            const reported = (err as AgentError).details?.usage;
            if (reported !== undefined) {
              const billed = validUsage(reported);
              spent = total(billed);
              addUsage(usage, billed);
            }
            await rated?.failed(err, this.d.metrics);
            if (err instanceof RetryableError && err.retryAfterMs !== undefined && !signal.aborted) throw new NamedWait(err);
            throw err;
          } finally {
            await rated?.settle(spent);
            await this.tenantBudget.settle(spec.tenant, spent - estimate.tokens, this.now());
          }
        },
        {
          signal, deadlineAt, now: this.now,
          onRetry: (attempt, err, delayMs) => log.warn({ code: 'model_retry', attempt, delayMs, err }, 'model call retried'),
        },
      );
    } catch (err) {
      if (signal.aborted) {
        if (total(usage) > 0) await chargeAbandoned(total(usage));
        throw err;
      }
      if (err instanceof RateLimitWait) return { throttled: err, charged: total(usage) };
      if (err instanceof BudgetStopError) return { failed: { status: 'budget_exceeded', reason: err.stop.reason }, charged: total(usage), budget: err.stop.kind };
      if (err instanceof DeadlineError) {
        const stop = wallClockStop(spec, this.now(), err.cause !== undefined);
        return { failed: { status: 'budget_exceeded', reason: stop.reason }, charged: total(usage), budget: stop.kind };
      }
      // A 429/5xx/network failure that named its wait, or that outlasted this delivery's attempts: an outage, waited out by delaying the job.
      if (err instanceof NamedWait) return { unavailable: { provider: provider.name, retryAfterMs: err.retryable.retryAfterMs }, charged: total(usage) };
      if (err instanceof RetryableError) return { unavailable: { provider: provider.name, retryAfterMs: undefined }, charged: total(usage) };
      const code = err instanceof AgentError ? err.code : 'model_failed';
      return { failed: { status: 'failed', reason: `${code}: ${(err as Error).message}` }, charged: total(usage) };
    }
    if (!turn.usage) {
      // Missing usage is an error, never zero (seed 004).
      return { failed: { status: 'failed', reason: 'missing_usage: the provider reported no token usage' }, charged: total(usage) };
    }
    this.d.metrics.modelTokens.inc({ tenant: spec.tenant, type: 'prompt' }, usage.promptTokens);
    this.d.metrics.modelTokens.inc({ tenant: spec.tenant, type: 'completion' }, usage.completionTokens);
    const over = spentCheck(spec, used.tokens + total(usage));
    if (over) return { failed: { status: 'budget_exceeded', reason: over.reason }, charged: total(usage), budget: over.kind };
    return {
      decision: {
        v: 1, kind: 'decision', step, model: provider.name, toolCalls: turn.toolCalls,
        ...(turn.final !== undefined ? { final: turn.final } : {}), ...(turn.text !== undefined ? { text: turn.text } : {}), usage, attempts,
      },
    };
  }

  /**
   * A provider outage is a wait, not a failure: the step job goes to BullMQ's delayed set until
   * the provider's Retry-After (uncapped; else RETRY_MAX_MS) has passed, and no worker holds it
   * meanwhile. The first failure's time rides in the job's data (`outageSince`). The wait is
   * bounded: one that would end at or past the run's deadline stops the run `budget_exceeded`
   * (wall_clock); one that would end past MODEL_OUTAGE_MAX_MS from the first failure parks it
   * `needs_human` / `provider_unavailable` (a status, an event and agent_runs_finished_total, by the commit).
   * What the failed attempts spent is charged before the job moves. If the process dies between
   * the data update and the move, the stall check redelivers the job and it fails (and waits) again.
   */
  private async waitOutOutage(
    job: Job, token: string, data: StepJobData, spec: RunSpec, outage: { provider: string; retryAfterMs: number | undefined }, charged: number,
    chargeAbandoned: (tokens: number) => Promise<void>, commit: (plan: CommitPlan) => Promise<void>, log: Logger,
  ): Promise<void> {
    const now = this.now();
    const waitMs = outage.retryAfterMs ?? this.d.cfg.RETRY_MAX_MS;
    const since = data.outageSince ?? now;
    const step = data.step;
    if (now + waitMs >= spec.limits.deadlineAt) {
      const stop = wallClockStop(spec, now, true);
      this.d.metrics.budgetStops.inc({ kind: stop.kind });
      log.warn({ code: 'budget_exceeded', kind: stop.kind, waitMs }, stop.reason);
      await commit({ ...this.stopPlan(step, { status: 'budget_exceeded', reason: stop.reason }, [], false), tokensDelta: charged });
      return;
    }
    if (now + waitMs > since + this.d.cfg.MODEL_OUTAGE_MAX_MS) {
      const reason = `provider_unavailable: ${outage.provider} failing for ${now - since} ms, next try in ${waitMs} ms, window ${this.d.cfg.MODEL_OUTAGE_MAX_MS} ms`;
      log.warn({ code: 'provider_unavailable', provider: outage.provider, outageMs: now - since, waitMs }, 'provider outage past its window: the run goes to a person');
      await commit({ ...this.stopPlan(step, { status: 'needs_human', reason }, [], false), tokensDelta: charged });
      return;
    }
    if (charged > 0) await chargeAbandoned(charged);
    if (data.outageSince === undefined) await job.updateData({ ...data, outageSince: since });
    await job.moveToDelayed(now + waitMs, token);
    this.d.metrics.modelWaits.inc({ provider: outage.provider });
    log.warn({ code: 'model_wait', provider: outage.provider, waitMs, outageMs: now - since }, 'provider unavailable: step delayed');
    throw new DelayedError();
  }

  private async runTool(
    agent: Agent, call: DecisionEntry['toolCalls'][number], ctx: ToolContext, spec: RunSpec, log: Logger, dispatchSignal: AbortSignal,
  ): Promise<{ obs: ObservationEntry } | { park: Terminal; approvalFor?: string }> {
    const base = { v: 1 as const, kind: 'observation' as const, step: ctx.step, callId: call.id, tool: call.name };
    const tool = agent.tools.get(call.name);
    if (!tool) return { obs: { ...base, status: 'format_error', output: { error: 'unknown_tool', tool: call.name } } };
    const parsed = tool.args.safeParse(call.args ?? {});
    if (!parsed.success) {
      // The model sees the format error on its next step; the step budget pays for it.
      return { obs: { ...base, status: 'format_error', output: { error: 'invalid_arguments', issues: parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })) } } };
    }
    const { deadlineAt } = spec.limits;
    if (tool.effect === 'read') {
      try {
        // Each attempt and each backoff ends by the run's deadline (DeadlineError: the step stops on the wall clock).
        const output = await withRetry(
          { maxAttempts: 3, baseMs: this.d.cfg.RETRY_BASE_MS, maxMs: this.d.cfg.RETRY_MAX_MS },
          () => withDeadlineScope(deadlineAt, ctx.signal, (callScope) => tool.execute(parsed.data, { ...ctx, get signal() { return callScope.signal; } }), this.now),
          { signal: ctx.signal, deadlineAt, now: this.now },
        );
        return { obs: { ...base, status: 'ok', output } };
      } catch (err) {
        if (ctx.signal.aborted || err instanceof DeadlineError) throw err;
        log.warn({ code: 'tool_error', tool: call.name, err }, 'read tool failed');
        return { obs: { ...base, status: 'tool_error', output: { error: (err as Error).message } } };
      }
    }
    if (!this.d.effects) return { obs: { ...base, status: 'tool_error', output: { error: 'write tools are not enabled on this worker' } } };
    const r = await this.d.effects.run({ tool, args: parsed.data, call, ctx: { ...ctx, signal: dispatchSignal }, tenant: spec.tenant, deadlineAt });
    if (r.kind === 'park') return { park: { status: r.status, reason: r.reason }, ...(r.status === 'waiting_approval' ? { approvalFor: r.actionId } : {}) };
    return { obs: { ...base, status: r.status, output: r.output, actionId: r.actionId } };
  }

  /**
   * Charges tokens spent by a step handed back before its decision (failed attempts at SIGTERM).
   * Fenced: if another owner has the step, nothing is charged (they are lost, logged).
   */
  private async chargeAbandoned(job: Job, token: string, lockKey: string, step: number, tokens: number, log: Logger): Promise<void> {
    const k = this.d.keys.run((job.data as StepJobData).runId);
    await chargeTokens(this.d.redis, { run: k.run, budget: k.budget, jobLock: lockKey }, { token, step, jobId: job.id!, tokens }).catch((err: unknown) => {
      log.warn({ code: 'abandoned_tokens_not_charged', tokens, err }, 'tokens of abandoned attempts not charged');
    });
  }

  /** Returns the bytes the decision adds to the transcript. */
  private async journalDecision(job: Job, token: string, lockKey: string, decision: DecisionEntry, log: Logger, startedEvent: string, used: Used): Promise<number> {
    const k = this.d.keys.run((job.data as StepJobData).runId);
    const encoded = encodeEntry(decision);
    const bytes = Buffer.byteLength(encoded);
    await journalDecision(this.d.redis, { run: k.run, budget: k.budget, journal: k.journal, events: k.events, jobLock: lockKey }, {
      token, step: decision.step, tokensDelta: total(decision.usage), contextBytesDelta: used.contextBytes === undefined ? undefined : bytes, entry: encoded, now: this.now(),
      eventsMaxLen: this.d.cfg.EVENTS_MAX_LEN, event: decisionEvent(decision), jobId: job.id!, startedEvent,
    });
    log.debug({ code: 'decision_journalled' }, 'decision journalled');
    return bytes;
  }

  /**
   * @param startedEvent this delivery's step_started event, '' when journalDecision already wrote it.
   * One request: the fenced commit, the next step's job, and the completion of
   * this job (moveToFinished, optionally fetching the worker's next job). If the
   * process dies after it, the run is wholly after the commit and this job is
   * already completed; a job fetched for this worker is recovered by the stall check.
   */
  private async commit(
    job: Job, token: string, lockKey: string, data: StepJobData, used: Used, plan: CommitPlan, log: Logger, fetchNext: boolean, startedEvent: string,
  ): Promise<void> {
    const { runId, step } = data;
    const jobId = job.id!;
    const k = this.d.keys.run(runId);
    const encoded = plan.entries.map(encodeEntry);
    let bytes = 0;
    for (let i = 0; i < encoded.length; i++) if (isContext(plan.entries[i]!.kind)) bytes += Buffer.byteLength(encoded[i]!);
    const nextUsed = grown({ steps: used.steps + plan.stepsDelta, tokens: used.tokens + plan.tokensDelta, contextBytes: used.contextBytes }, bytes);
    const queue = this.d.store.queues.forRun(runId);
    const running = plan.status === 'running';
    // When the run stops, the keys are still passed (the script declares them) but no job is added.
    const next: StepJobData | Record<string, never> = running ? { v: 1, runId, step: step + 1, used: nextUsed, ...(data.limits ? { limits: data.limits } : {}) } : {};
    const add = await captureAddStandardJob(queue, STEP_JOB_NAME, next, this.d.store.queues.jobOptions(runId, step + 1));
    const finish = captureMoveToCompleted(job, token, fetchNext);
    this.d.crash.hit('before_commit', step);
    const now = this.now();
    const keys = {
      run: k.run, budget: k.budget, journal: k.journal, events: k.events, jobLock: lockKey, actions: k.actions,
      approvalAction: plan.approvalFor ? this.d.keys.action(runId, plan.approvalFor) : k.run, approvals: this.d.keys.approvals(this.d.keys.shardOf(runId)),
    };
    const { finished, committed } = await commitStep(this.d.redis, keys, {
      token, step, status: plan.status, reason: plan.reason, stepsDelta: plan.stepsDelta, tokensDelta: plan.tokensDelta, contextBytesDelta: used.contextBytes === undefined ? undefined : bytes, now,
      eventsMaxLen: this.d.cfg.EVENTS_MAX_LEN, advance: plan.advance, retentionMs: this.d.cfg.RUN_RETENTION_MS,
      committedEvent: JSON.stringify({ step, status: plan.status, entries: encoded.length }),
      carriesDecision: plan.carriesDecision, jobId, nextJobId: stepJobId(runId, step + 1), entries: encoded, finish, next: add, addNext: running,
      startedEvent, decisionEvent: plan.carriesDecision ? decisionEvent(plan.entries[0] as DecisionEntry) : '',
      approvalFor: plan.approvalFor ?? '', approvalExpiresAt: now + this.d.cfg.APPROVAL_TTL_MS,
    }).catch((err: unknown) => {
      if (err instanceof FenceError && err.code === 'decision_exists') log.warn({ code: 'decision_exists' }, 'a decision was journalled concurrently');
      throw err;
    });
    if (isScriptError(finished)) {
      // Committed, but BullMQ refused the completion: its worker completes the job as usual.
      log.warn({ code: 'complete_in_commit_refused', bullmqCode: finished }, 'job not completed by the commit');
    } else {
      completeFromCommit(job, finished, Number(finish.argv[1]));
    }
    this.d.metrics.stepsCommitted.inc();
    this.d.crash.hit('after_commit', step);
    // A recorded cancel or an expired approval may have changed the status the plan asked for.
    countRunFinished(this.d.metrics, committed, committed === plan.status ? plan.reason : committed === 'cancelled' ? 'cancelled_by_operator' : 'approval_expired');
    if (committed !== 'running') {
      this.transcripts.forget(runId);
      // The run stopped or parked: its slot goes to the next run in line. If this fails or the process dies here, the bookkeeping sweep releases it.
      await this.d.admission?.release(runId).catch((err: unknown) => log.warn({ code: 'flow_release_failed', err }, 'slot not released (the sweep will)'));
      log.info({ code: 'run_' + committed, reason: committed === plan.status ? plan.reason : undefined, steps: nextUsed.steps, tokens: nextUsed.tokens }, 'run stopped');
    }
  }
}

/** The `decision` event: what the model chose, by tool name (no arguments: they may hold customer text). */
function decisionEvent(d: DecisionEntry): string {
  return JSON.stringify({ step: d.step, tools: d.toolCalls.map((c) => c.name), final: d.final !== undefined });
}

/** The first invalid field's path (`used.tokens`), never its value. */
function fieldOf(err: z.ZodError): string {
  const path = err.issues[0]?.path.map(String).join('.') ?? '';
  return /^[\w.]{1,80}$/.test(path) ? path : '(root)';
}

/** The code of a reason (`version_mismatch: ...` -> `version_mismatch`). */
function reasonCodeOf(reason: string): string {
  return reason.split(':', 1)[0]!;
}

function total(u: Usage): number {
  return u.promptTokens + u.completionTokens;
}

/** A provider's usage, validated (non-negative safe integers): an invalid one is a provider error, like a missing one. */
function validUsage(u: unknown): Usage {
  const r = usageSchema.safeParse(u);
  if (!r.success) {
    throw new TerminalError('invalid_usage', `the provider reported an invalid token usage (${r.error.issues[0]?.path.join('.')}: ${r.error.issues[0]?.message})`);
  }
  return r.data;
}

function addUsage(into: Usage, u: Usage): void {
  into.promptTokens += u.promptTokens;
  into.completionTokens += u.completionTokens;
}

const LEVELS: ReadonlySet<string> = new Set(['trace', 'debug', 'info', 'warn', 'error', 'fatal']);
const noop = (): void => {};

/**
 * The step's child logger (runId, step, jobId, attempt on every line), made on
 * the first line actually written: pino's child() serializes and redacts its
 * bindings at once (several µs), and a read-only step on its happy path writes
 * no line at the usual levels.
 */
function lazyChild(parent: Logger, bindings: Record<string, unknown>): Logger {
  let child: Logger | undefined;
  return new Proxy(parent, {
    get(target, prop) {
      if (typeof prop === 'string' && LEVELS.has(prop) && !target.isLevelEnabled(prop)) return noop;
      child ??= target.child(bindings);
      const value: unknown = Reflect.get(child, prop, child);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(child) : value;
    },
  });
}

function sameLimits(a: RunLimits, b: RunLimits): boolean {
  return a.maxSteps === b.maxSteps && a.maxTokens === b.maxTokens && a.maxWallMs === b.maxWallMs && a.deadlineAt === b.deadlineAt;
}
