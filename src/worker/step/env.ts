/**
 * What the stages are given: the options a step reads, the narrow store, and the
 * collaborators (agents, providers, ledger, budgets), each behind the interface a
 * stage needs. The processor builds one per worker; unit tests build one over the
 * in-memory store.
 */
import type { Tracer } from '@opentelemetry/api';
import type { Agent } from '../../core/agent.js';
import type { ModelProvider } from '../../core/model.js';
import type { BudgetStop } from '../../budget/tenantBudget.js';
import type { SpendHold, SpendScope } from '../../budget/spend.js';
import type { Price, PriceEntry } from '../../core/prices.js';
import type { Metrics } from '../../metrics/metrics.js';
import type { CrashPoints } from '../../config/testHooks.js';
import type { RunSpec } from '../../runs/spec.js';
import type { EffectRunner } from '../effects.js';
import type { FollowUpContext } from '../followUp.js';
import type { VersionVerdict } from '../versionGate.js';
import type { RateLimits } from '../../flow/rateLimits.js';
import type { StepStore } from './store.js';
import type {
  ChildOutcome,
  ChildStart,
  ChildStartRequest,
  HandoffLookup,
  ParentStanding,
  TakeReply,
} from '../../runs/children.js';

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
  /** How long a model outage may last, from its first failure, before the run parks needs_human (ms). */
  readonly MODEL_OUTAGE_MAX_MS: number;
  /** Cap of a run's event stream. */
  readonly EVENTS_MAX_LEN: number;
  /** How long a finished run's keys live, in ms. */
  readonly RUN_RETENTION_MS: number;
  /** How long a step waits when Redis refused a write for memory, in s (default 2, the API's Retry-After). */
  readonly STORE_RETRY_AFTER_S?: number;
  /** With an archive, a finished run's keys get their retention once it is archived (src/store/archiveQueue.ts). */
  readonly ARCHIVE_URL?: string | undefined;
  /** How long a pending approval waits before it expires, in ms. */
  readonly APPROVAL_TTL_MS: number;
  /** Per-tenant token budget per UTC day (0 = none). */
  readonly TENANT_DAILY_TOKENS: number;
  /** Stream answer text to the run's events, batched by time or size (src/worker/textStream.ts). */
  readonly MODEL_STREAMING: boolean;
  readonly MODEL_STREAM_FLUSH_MS: number;
  readonly MODEL_STREAM_FLUSH_CHARS: number;
  /** How long a follow-up's first step is delayed, each time, while the previous run of its subject is at work (ms). */
  readonly FOLLOW_UP_WAIT_MS: number;
  /** How long a wait-for-event's record is kept past its due time (ms). */
  readonly EVENT_KEEP_MS: number;
  /** Model prices over the defaults; absent (a StepOptions built without them): money is not counted. */
  readonly MODEL_PRICES?: readonly PriceEntry[];
  /** Money limits in µ$ (0 or absent = none): src/budget/spend.ts. */
  readonly TENANT_DAILY_COST?: number;
  readonly TENANT_MONTHLY_COST?: number;
  readonly AGENT_DAILY_COST?: number;
  readonly FLEET_MONTHLY_COST?: number;
  /** How long an attempt's spend settlement may wait in memory for the next batch (ms; src/budget/spend.ts). */
  readonly SPEND_FLUSH_MS?: number;
  /** How many attempts' cost estimates one lease of money holds, with a limit in force (src/budget/spend.ts). */
  readonly SPEND_LEASE_ATTEMPTS?: number;
}

/** The tenant's day of tokens (src/budget/tenantBudget.ts): reserved before each model attempt, settled after. */
export interface TenantTokens {
  reserve(tenant: string, amount: number, nowMs: number): Promise<BudgetStop | undefined>;
  settle(tenant: string, delta: number, nowMs: number): Promise<void>;
}

/** The money budgets of src/budget/spend.ts, as a step uses them. */
export interface SpendPort {
  readonly limited: boolean;
  priceAt(provider: string, model: string | undefined, nowMs: number): Price | undefined;
  reserve(scope: SpendScope, estimate: number, nowMs: number): Promise<{ hold: SpendHold } | { stop: BudgetStop }>;
  /** Batched in memory: sent within SPEND_FLUSH_MS (src/budget/spend.ts). */
  settle(scope: SpendScope, cost: number, hold: SpendHold | undefined, nowMs: number): void;
  /** Sends what is pending (a graceful stop). */
  close(): Promise<void>;
}

/** A follow-up's previous conversation (src/worker/followUp.ts). */
export interface FollowUpSource {
  context(agent: Agent, spec: RunSpec): Promise<FollowUpContext>;
  /** The text already known for this run, '' for none. */
  known(spec: RunSpec): string;
}

/** Which agent runs a spec on this worker, and what to do with a spec it does not serve. */
export interface AgentChoice {
  agentFor(spec: RunSpec): Agent | undefined;
  verdict(spec: RunSpec): Promise<VersionVerdict>;
}

/**
 * Child runs of agent tools (src/runs/children.ts): started through the producer's intake, read by the parent's
 * wake, and the parent's wake job promoted when a child ends.
 */
export interface ChildRunPort {
  start(req: ChildStartRequest): Promise<ChildStart>;
  /**
   * The child an earlier call of the same hand-off (its digest, handoffDigestOf) started in this run, or undefined
   * (none, or it is this call's own).
   */
  earlier(req: HandoffLookup): Promise<string | undefined>;
  outcome(childRunId: string): Promise<ChildOutcome>;
  /**
   * The parent's wake takes a child's outcome (ChildRuns.take): marked, so nothing puts it back to work after; or
   * `at_work`, not marked (before the parent's deadline only).
   */
  take(childRunId: string, parentRunId: string, atDeadline: boolean): Promise<TakeReply>;
  /** Whether every child ended (terminal, handed to a person, or gone). */
  allEnded(children: readonly { runId: string }[]): Promise<boolean>;
  /**
   * The parent's status, cursor and wait (undefined when it is gone): a child whose parent ended, or took its outcome
   * and moved on (parentMovedOn), ends too.
   */
  parentStanding(parentRunId: string): Promise<ParentStanding | undefined>;
  wakeParent(parentRunId: string, childRunId: string): Promise<boolean>;
  /** A parent that parked on a child which had already ended resumes now. */
  wakeIfChildEnded(parentRunId: string): Promise<boolean>;
}

/** A run woken from a wait, as flow control sees it: its wake job's slot. */
export interface WokenRun {
  runId: string;
  tenant: string;
  agent: string;
  jobId: string;
}

export interface StepEnv {
  readonly cfg: StepOptions;
  readonly store: StepStore;
  readonly agents: AgentChoice;
  readonly providers: ReadonlyMap<string, ModelProvider>;
  readonly effects: EffectRunner | undefined;
  readonly tenant: TenantTokens;
  readonly followUps: FollowUpSource;
  readonly metrics: Metrics;
  readonly crash: CrashPoints;
  readonly now: () => number;
  readonly tracer: Tracer | undefined;
  /** Names this process in run events. */
  readonly workerName: string;
  /** Flow control: a run that stops or parks gives its slot back (src/flow/admission.ts). */
  readonly admission:
    | {
        /** `byJobId`: the job whose commit stopped or parked the run (a slot held for a later job stays). */
        release(runId: string, byJobId?: string): Promise<void>;
        /** A run woken from a wait asks for a slot for its wake job: held, or waiting in its tenant's line. */
        wake?(run: WokenRun, nowMs: number): Promise<'held' | 'waiting'>;
        /** The woken run's wake job is delayed: released now if it was admitted meanwhile. */
        wokenWaits?(run: WokenRun): Promise<void>;
        /** Takes a run out of its line (true when it was waiting there). */
        withdraw?(runId: string): Promise<boolean>;
        /** The BullMQ priority of the tenant's next step job, 0 for none (src/flow/stepPriority.ts). */
        stepPriority?(tenant: string): number;
      }
    | undefined;
  /** Model rate limits, reserved around each model attempt (src/flow/rateLimits.ts). */
  readonly rates: RateLimits | undefined;
  /** Money: model prices and the tenant's, agent's and fleet's spend (src/budget/spend.ts); undefined: not counted. */
  readonly spend?: SpendPort | undefined;
  /** Child runs of agent tools; undefined where none can be started (an agent tool's call is then a tool error). */
  readonly children?: ChildRunPort | undefined;
}
