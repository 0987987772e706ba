/**
 * Builds the parts every process shares from the frozen config: the agents
 * (AGENTS_MODULE, src/server/loadAgents.ts), Redis connections, key space, queues,
 * run store, model providers, metrics. Each process (api, worker, reconciler,
 * demo) owns one context and closes it. The engine sees it as an
 * EngineContext (src/runs/engineContext.ts).
 */
import type { Logger } from 'pino';
import type { Config } from '../config/config.js';
import { scriptedModelAllowed } from '../config/testHooks.js';
import { createLogger } from '../metrics/log.js';
import { type Metrics, newMetrics } from '../metrics/metrics.js';
import { registerScrapeCollectors } from '../runs/scrape.js';
import { createTracing, type Tracing } from '../metrics/tracing.js';
import { assertRedisSafe, createRedis, targetOf, waitForRedis } from '../store/connect.js';
import { KeySpace } from '../store/keys.js';
import { shardsPerMaster } from '../store/shardSpread.js';
import { loadScripts } from '../store/luaScripts.js';
import { ShardQueues } from '../store/queues.js';
import { RunStore } from '../runs/store.js';
import { RUN_STATUSES, TERMINAL_STATUSES } from '../core/status.js';
import { type Agent, type AgentCatalog as Catalog, AgentCatalog } from '../core/agent.js';
import type { ModelProvider } from '../core/model.js';
import type { EngineContext } from '../runs/engineContext.js';
import { loadAgents } from './loadAgents.js';
import { Admission } from '../flow/admission.js';
import { RateLimits } from '../flow/rateLimits.js';
import { registerFlowGauges } from '../flow/gauges.js';
import { checkModelChoices } from '../producer/modelChoice.js';
import { checkAgentBudgets } from '../producer/intake.js';
import { childRunStarter } from '../producer/childRuns.js';
import { ScriptedProvider } from '../models/scripted.js';
import { OpenAIProvider } from '../models/openai.js';
import { anthropicProvider, openAICompatibleProvider } from '../models/aiSdk.js';
import { openReplicaWaitConnection } from '../store/replicated.js';
import { openArchive, runArchive } from '../archive/db.js';
import { checkReplicas } from './replicaCheck.js';

/**
 * The providers this process can call, by name. A vendor's provider exists only with its
 * credential (OPENAI_API_KEY, ANTHROPIC_API_KEY) or endpoint (OPENAI_COMPATIBLE_BASE_URL):
 * a model choice naming one that is missing stops the boot (checkModelChoices), and a run
 * that still names one ends `failed` / `model_unavailable: <provider>`.
 */
export function buildProviders(cfg: Config): Map<string, ModelProvider> {
  const providers = new Map<string, ModelProvider>();
  if (scriptedModelAllowed(cfg)) providers.set('scripted', new ScriptedProvider());
  const common = { timeoutMs: cfg.MODEL_TIMEOUT_MS };
  if (cfg.OPENAI_API_KEY)
    providers.set(
      'openai',
      new OpenAIProvider({
        ...common,
        baseUrl: cfg.OPENAI_BASE_URL,
        model: cfg.OPENAI_MODEL,
        apiKey: cfg.OPENAI_API_KEY,
      }),
    );
  if (cfg.ANTHROPIC_API_KEY)
    providers.set(
      'anthropic',
      anthropicProvider({
        ...common,
        baseUrl: cfg.ANTHROPIC_BASE_URL,
        model: cfg.ANTHROPIC_MODEL,
        apiKey: cfg.ANTHROPIC_API_KEY,
      }),
    );
  if (cfg.OPENAI_COMPATIBLE_BASE_URL && cfg.OPENAI_COMPATIBLE_MODEL) {
    providers.set(
      'openai-compatible',
      openAICompatibleProvider({
        ...common,
        baseUrl: cfg.OPENAI_COMPATIBLE_BASE_URL,
        model: cfg.OPENAI_COMPATIBLE_MODEL,
        ...(cfg.OPENAI_COMPATIBLE_API_KEY ? { apiKey: cfg.OPENAI_COMPATIBLE_API_KEY } : {}),
      }),
    );
  }
  return providers;
}

export interface ContextOptions {
  log?: Logger;
  metrics?: Metrics;
  tracing?: Tracing;
  /** The agents to run; default: those of AGENTS_MODULE (or the built-in ones). */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  agents?: readonly Agent<any>[] | Catalog;
  /** Model providers; default: buildProviders(cfg). */
  providers?: Map<string, ModelProvider>;
}

export async function createContext(cfg: Config, name: string, opts: ContextOptions = {}): Promise<EngineContext> {
  // Agents first: a deployment whose AGENTS_MODULE is broken stops before it touches Redis.
  const agents =
    opts.agents === undefined
      ? await loadAgents(cfg)
      : opts.agents instanceof AgentCatalog
        ? opts.agents
        : new AgentCatalog(opts.agents as readonly Agent[]);
  // Then the model choices: one naming a provider this process lacks stops it here, the field named.
  const providers = opts.providers ?? buildProviders(cfg);
  checkModelChoices(cfg, agents, providers);
  checkAgentBudgets(cfg, agents);
  const log = opts.log ?? createLogger(name, cfg.LOG_LEVEL);
  const target = targetOf(cfg);
  const redis = createRedis(target, name);
  // Boot: Redis answers within REDIS_BOOT_TIMEOUT_MS or the process stops naming it (src/server/boot.ts).
  await waitForRedis(redis, target, cfg.REDIS_BOOT_TIMEOUT_MS);
  redis.on('error', (err) => log.warn({ code: 'redis_error', err }, 'redis connection error'));
  let closing = false;
  // A client that ends without the process closing it never reconnects: said once, loudly; /healthz fails from then on.
  redis.once('end', () => {
    if (!closing)
      log.error(
        { code: 'store_connection_ended' },
        'the redis client gave up reconnecting: liveness fails until restart',
      );
  });
  const metrics = opts.metrics ?? newMetrics({ defaultMetrics: true });
  const report = await assertRedisSafe(redis, (m) => log.warn({ code: 'redis_aof_off' }, m));
  metrics.redisConfigOk.set({ check: 'noeviction' }, report.noeviction ? 1 : 0);
  metrics.redisConfigOk.set({ check: 'aof' }, report.aof ? 1 : 0);
  await checkReplicas(cfg, redis, log);
  await loadScripts(redis);
  const keys = new KeySpace(cfg.KEY_PREFIX, cfg.BULL_PREFIX, cfg.SHARDS);
  const spread = shardsPerMaster(redis, keys);
  const idle = [...spread].filter(([, n]) => n === 0).map(([node]) => node);
  if (idle.length > 0) {
    log.warn(
      { code: 'shards_not_spread', shards: cfg.SHARDS, idle, spread: Object.fromEntries(spread) },
      `${idle.length} of ${spread.size} Cluster masters own none of the ${cfg.SHARDS} shards and take no work: raise SHARDS`,
    );
  }
  const queues = new ShardQueues(keys, redis, (err) =>
    log.warn({ code: 'queue_error', err }, 'queue connection error'),
  );
  const store = new RunStore(redis, keys, queues, cfg.EVENTS_MAX_LEN, cfg.SUBJECT_LINK_TTL_MS);
  registerScrapeCollectors(
    metrics,
    { redis, keys, queues, log },
    { runs: { statuses: RUN_STATUSES, terminal: new Set(TERMINAL_STATUSES), retentionMs: cfg.RUN_RETENTION_MS } },
  );
  const tracing = opts.tracing ?? createTracing(cfg, name);
  const admission = new Admission({ redis, keys, queues, cfg, metrics, log });
  const rates = new RateLimits(redis, keys, cfg);
  registerFlowGauges(metrics, { redis, keys, cfg, log });
  const replicaWaits =
    cfg.REDIS_MIN_REPLICAS > 0
      ? await openReplicaWaitConnection(redis, (err) =>
          log.warn({ code: 'redis_error', err }, 'replication wait connection error'),
        )
      : undefined;
  const archivePool = cfg.ARCHIVE_URL === undefined ? undefined : await openArchive(cfg.ARCHIVE_URL, log);
  if (!archivePool && cfg.APP_MODE === 'production') {
    log.warn(
      { code: 'archive_unconfigured', retentionMs: cfg.RUN_RETENTION_MS },
      "no ARCHIVE_URL: a run's history ends when its keys expire (RUN_RETENTION_MS after it ends)",
    );
  }
  const ctx: EngineContext = {
    cfg,
    log,
    redis,
    ...(replicaWaits ? { replicaWaits } : {}),
    keys,
    queues,
    store,
    agents,
    providers,
    metrics,
    tracing,
    admission,
    rates,
    ...(archivePool ? { archive: runArchive(archivePool) } : {}),
    async close() {
      closing = true;
      await queues.close();
      await archivePool?.end().catch(() => {});
      replicaWaits?.disconnect();
      redis.disconnect();
      await tracing.shutdown().catch(() => {});
    },
  };
  // Agent tools start their child runs through the producer's intake; the worker is given the starter.
  ctx.childRuns = childRunStarter(ctx);
  return ctx;
}

/**
 * Said by each process once it serves (a boot that fails stays one line): a deployment that forgot APP_MODE would
 * otherwise run without its production checks in silence.
 */
export function warnIfDevelopment(cfg: Config, log: Logger): void {
  if (cfg.APP_MODE !== 'development') return;
  log.warn(
    { code: 'development_mode' },
    'APP_MODE=development: the scripted model, run-supplied scripts, short secrets and an open /metrics are allowed; set APP_MODE=production (or NODE_ENV=production) for a deployment',
  );
}
