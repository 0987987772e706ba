/**
 * The step processor BullMQ runs: one step job through the stage pipeline
 * (src/worker/step/pipeline.ts), with the Redis store, the version gate, the
 * tenant's budget and the follow-ups built from the worker's dependencies.
 * Decision record 0004: docs/decisions/0004-correctness-never-rests-on-the-lock-or-on-jobid-de.md.
 */
import type { Context, Tracer } from '@opentelemetry/api';
import type { Job } from 'bullmq';
import type { Logger } from 'pino';
import type { Agent, AgentCatalog } from '../../core/agent.js';
import type { ModelProvider } from '../../core/model.js';
import { traced } from '../../metrics/tracing.js';
import type { Metrics } from '../../metrics/metrics.js';
import type { CrashPoints } from '../../config/testHooks.js';
import { TenantBudget } from '../../budget/tenantBudget.js';
import type { RunSpec, StepJobData } from '../../runs/spec.js';
import type { RunSpecCache, RunStore } from '../../runs/store.js';
import { TranscriptCache } from '../../runs/transcriptCache.js';
import type { RedisClient } from '../../store/connect.js';
import type { KeySpace } from '../../store/keys.js';
import type { RateLimits } from '../../flow/rateLimits.js';
import type { EffectRunner } from '../effects.js';
import { FollowUps } from '../followUp.js';
import type { VersionGate, VersionVerdict } from '../versionGate.js';
import type { AgentChoice, ChildRunPort, StepEnv, StepOptions, SpendPort } from './env.js';
import { ChildRuns, type ChildRunStarter } from '../../runs/children.js';
import type { Delivery } from './load.js';
import { StepPipeline } from './pipeline.js';
import { SpendBudget } from '../../budget/spend.js';
import { BullStepJob, RedisStepStore } from './redisStore.js';

export type { StepOptions } from './env.js';

export interface StepDeps {
  cfg: StepOptions;
  redis: RedisClient;
  keys: KeySpace;
  store: RunStore;
  specs: RunSpecCache;
  /** The agents this worker runs: a run's spec names its agent. */
  agents: AgentCatalog;
  /**
   * The versions this worker serves and the registry of those others serve; without it, the catalog's versions (no
   * hand-back).
   */
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
  /**
   * Flow control: a run that stops or parks gives its slot back, and its next step's job is ordered by its tenant's
   * share (src/flow/admission.ts).
   */
  admission?: StepEnv['admission'];
  /** Model rate limits, reserved around each model attempt (src/flow/rateLimits.ts). */
  rates?: RateLimits | undefined;
  /** Money budgets; by default built from cfg when it names MODEL_PRICES. */
  spend?: SpendPort | undefined;
  /** Starts the child runs of agent tools (the producer's intake, given by the composition root). */
  childRuns?: ChildRunStarter | undefined;
}

/** The step as BullMQ's processor: builds the stages' environment on Redis and runs the pipeline per job. */
export class StepProcessor {
  private readonly pipeline: StepPipeline;
  private readonly spend: SpendPort | undefined;

  constructor(private readonly d: StepDeps) {
    const env = envOf(d);
    this.spend = env.spend;
    this.pipeline = new StepPipeline(env);
  }

  /** At a graceful stop, once no step runs: the money settled in memory is sent (src/budget/spend.ts). */
  async close(): Promise<void> {
    await this.spend?.close();
  }

  /**
   * @param signal aborted at SIGTERM: model calls, reads and waits stop; the job is handed back.
   * @param dispatchSignal aborted when the grace period ends: a write in flight is cut off
   *   (the ledger keeps it dispatched; the next owner reconciles it).
   * @param fetchNext asked at commit time: whether the commit, which also completes this job,
   *   should fetch the worker's next job (BullMQ's worker then takes it from `job.moveToCompleted`).
   */
  async process(
    job: Job,
    token: string,
    signal: AbortSignal,
    dispatchSignal: AbortSignal = signal,
    fetchNext: () => boolean = () => false,
  ): Promise<void> {
    const attributes = () => {
      const raw = job.data as Partial<StepJobData>;
      return {
        'agent.run_id': String(raw.runId),
        'agent.step': Number(raw.step),
        'agent.job_id': String(job.id),
        'agent.attempt': job.attemptsStarted,
      };
    };
    const delivery = (trace: Context | undefined): Delivery => ({
      job: new BullStepJob(job, token),
      signal,
      dispatchSignal,
      trace,
      log: this.d.log,
    });
    return traced(this.d.tracer, { name: 'agent.step', attributes }, (trace) =>
      this.pipeline.run(delivery(trace), fetchNext),
    );
  }
}

/** The money budgets of a worker, their limits exported for the spend alerts (deploy/prometheus/rules.yml). */
function spendOf(d: StepDeps): SpendPort | undefined {
  if (d.spend) return d.spend;
  if (!d.cfg.MODEL_PRICES) return undefined;
  const opts = spendOptions(d.cfg);
  d.metrics.spendLimits.set({ scope: 'tenant_day' }, opts.TENANT_DAILY_COST);
  d.metrics.spendLimits.set({ scope: 'tenant_month' }, opts.TENANT_MONTHLY_COST);
  d.metrics.spendLimits.set({ scope: 'agent_day' }, opts.AGENT_DAILY_COST);
  d.metrics.spendLimits.set({ scope: 'fleet_month' }, opts.FLEET_MONTHLY_COST);
  return new SpendBudget(d.redis, d.keys, opts, (err) => {
    d.metrics.spendFlushFailures.inc();
    d.log.warn({ code: 'spend_flush_failed', err }, 'spend settlements not sent; kept for the next batch');
  });
}

function envOf(d: StepDeps): StepEnv {
  const transcripts = d.transcripts ?? new TranscriptCache();
  const store = new RedisStepStore({
    cfg: d.cfg,
    redis: d.redis,
    keys: d.keys,
    runs: d.store,
    specs: d.specs,
    transcripts,
    metrics: d.metrics,
    crash: d.crash,
  });
  return {
    cfg: d.cfg,
    store,
    agents: agentChoice(d),
    providers: d.providers,
    effects: d.effects,
    tenant: new TenantBudget(d.redis, d.keys, d.cfg.TENANT_DAILY_TOKENS),
    spend: spendOf(d),
    followUps: new FollowUps(d.store),
    metrics: d.metrics,
    crash: d.crash,
    now: d.now ?? Date.now,
    tracer: d.tracer,
    admission: d.admission,
    rates: d.rates,
    children: childPort(d),
    workerName: d.workerName ?? `worker:${process.pid}`,
  };
}

/** Child runs read on Redis; started by the starter the worker was given, refused without one. */
function childPort(d: StepDeps): ChildRunPort {
  const runs = new ChildRuns({
    redis: d.redis,
    keys: d.keys,
    queues: d.store.queues,
    retentionMs: d.cfg.RUN_RETENTION_MS,
  });
  const starter = d.childRuns;
  return {
    start: async (req) => (starter ? starter.start(req) : { kind: 'refused', error: 'unavailable' }),
    earlier: async (req) => (starter ? starter.earlier(req) : undefined),
    outcome: (id) => runs.outcome(id),
    take: (id, parentId, atDeadline) => runs.take(id, parentId, atDeadline),
    allEnded: (children) => runs.allEnded(children),
    parentStanding: (id) => runs.parentStanding(id),
    wakeParent: (parentId, childId) => runs.wakeParent(parentId, childId),
    wakeIfChildEnded: (parentId) => runs.wakeIfChildEnded(parentId),
  };
}

/** The version gate when the worker has one; else the catalog's own versions, and no hand-back. */
function agentChoice(d: StepDeps): AgentChoice {
  if (d.versions) return d.versions;
  const agentFor = (spec: RunSpec): Agent | undefined => {
    const agent = d.agents.get(spec.agent);
    const pinned = agent && agent.version === spec.agentVersion && agent.tools.schemaHash === spec.toolsHash;
    return pinned ? agent : undefined;
  };
  const verdict = async (spec: RunSpec): Promise<VersionVerdict> =>
    d.agents.get(spec.agent)
      ? { kind: 'park', reason: `version_mismatch: pinned ${spec.agentVersion}/${spec.toolsHash} served none` }
      : { kind: 'park', reason: `unknown_agent: ${spec.agent}` };
  return { agentFor, verdict };
}

/** The money budgets' options from the step's (absent limits: none). */
function spendOptions(cfg: StepOptions) {
  return {
    MODEL_PRICES: cfg.MODEL_PRICES ?? [],
    TENANT_DAILY_COST: cfg.TENANT_DAILY_COST ?? 0,
    TENANT_MONTHLY_COST: cfg.TENANT_MONTHLY_COST ?? 0,
    AGENT_DAILY_COST: cfg.AGENT_DAILY_COST ?? 0,
    FLEET_MONTHLY_COST: cfg.FLEET_MONTHLY_COST ?? 0,
    SPEND_FLUSH_MS: cfg.SPEND_FLUSH_MS ?? 1000,
    SPEND_LEASE_ATTEMPTS: cfg.SPEND_LEASE_ATTEMPTS ?? 16,
  };
}
