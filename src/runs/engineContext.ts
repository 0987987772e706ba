/**
 * What the engine is given by the process that runs it: the frozen config,
 * Redis and its key space, queues and the run store, the agents it runs and
 * the model providers, metrics, tracing and a logger. Built by the entry points
 * (src/server/buildContext.ts); the engine never builds one and never names an agent.
 */
import type { Logger } from 'pino';
import type { AgentCatalog } from '../core/agent.js';
import type { ModelProvider } from '../core/model.js';
import type { Config } from '../config/config.js';
import type { Metrics } from '../metrics/metrics.js';
import type { Tracing } from '../metrics/tracing.js';
import type { RedisClient } from '../store/connect.js';
import type { KeySpace } from '../store/keys.js';
import type { ShardQueues } from '../store/queues.js';
import type { RunStore } from './store.js';
import type { Admission } from '../flow/admission.js';
import type { RateLimits } from '../flow/rateLimits.js';
import type { ChildRunStarter } from './children.js';
import type { Pool } from 'pg';
import type { SearchQuery } from './search.js';
import type { ArchivedPage, RunQuery } from './list.js';
import type { RunStatus } from '../core/status.js';

/**
 * The archive of ended runs in PostgreSQL (src/archive; ARCHIVE_URL): what a run's readers ask of it once Redis no
 * longer has the run.
 */
export interface RunArchive {
  /** GET /v1/runs/:id's body as archived, or undefined. */
  view(runId: string): Promise<Record<string, unknown> | undefined>;
  /** The archived run's tenant, or undefined. */
  tenantOf(runId: string): Promise<string | undefined>;
  /** The archived runs a search finds (the same terms, filters, tenants and cursor as Redis' search). */
  search(q: SearchQuery): Promise<ArchivedPage>;
  /** The archived runs a listing finds (the same statuses, tenants, agent, time range and cursor as Redis' listing). */
  list(q: RunQuery): Promise<ArchivedPage>;
  /** What a run's page shows of an archived run beside its view (its agent, input and events), or undefined. */
  details(runId: string): Promise<ArchivedRunDetails | undefined>;
  /** The status and child runs of each of `runIds` the archive holds (a run tree's nodes Redis let go). */
  treeNodes(runIds: readonly string[]): Promise<Map<string, ArchivedTreeNode>>;
  readonly pool: Pool;
}

/** An archived run's agent, input (the spec's) and events (as the stream held them, each with its event id). */
export interface ArchivedRunDetails {
  agent: string;
  input: unknown;
  events: { id: string; type: string; data: string }[];
}

/** An archived run's status and child runs. */
export interface ArchivedTreeNode {
  status: RunStatus;
  childRunIds: string[];
}

export interface EngineContext {
  cfg: Config;
  log: Logger;
  redis: RedisClient;
  /** Where replication waits run (src/store/replicated.ts): present when REDIS_MIN_REPLICAS > 0. */
  replicaWaits?: RedisClient;
  keys: KeySpace;
  queues: ShardQueues;
  store: RunStore;
  /** The agents this process runs, by name (each with its tools). */
  agents: AgentCatalog;
  /** Model providers by name (a run's spec names one). */
  providers: Map<string, ModelProvider>;
  metrics: Metrics;
  /** Flow control: tenants' lines and concurrency limits (src/flow/admission.ts); off unless FLOW_CONTROL. */
  admission?: Admission;
  /** Model rate limits (src/flow/rateLimits.ts); none unless MODEL_RATE_LIMITS. */
  rates?: RateLimits;
  /** Starts the child runs of agent tools (src/runs/children.ts); set by the composition root. */
  childRuns?: ChildRunStarter;
  /** The archive (ARCHIVE_URL); absent without one. */
  archive?: RunArchive;
  /** Spans (TRACING); `tracing.tracer` is undefined when off. */
  tracing: Tracing;
  close(): Promise<void>;
}
