/**
 * Builds the parts every process shares from the frozen config: Redis
 * connections, key space, queues, run store, tools, model providers, metrics.
 * Each process (api, worker, reconciler, demo) owns one context and closes it.
 */
import type { Logger } from 'pino';
import { scriptedModelAllowed, type Config } from '../config/config.js';
import { createLogger } from '../metrics/log.js';
import { Metrics, newMetrics } from '../metrics/metrics.js';
import { registerScrapeCollectors } from '../metrics/scrape.js';
import { createTracing, type Tracing } from '../metrics/tracing.js';
import { assertRedisSafe, createRedis, targetOf, waitForRedis, type RedisClient } from '../store/connect.js';
import { KeySpace } from '../store/keys.js';
import { loadScripts } from '../store/scripts.js';
import { ShardQueues } from '../runs/queues.js';
import { RunStore } from '../runs/store.js';
import { RUN_STATUSES, TERMINAL_STATUSES } from '../producer/schemas.js';
import { defaultRegistry, type ToolRegistry } from '../agents/support/tools/index.js';
import type { ModelProvider } from '../core/model.js';
import { ScriptedProvider } from '../models/scripted.js';
import { OpenAIProvider } from '../models/openai.js';

export interface AppContext {
  cfg: Config;
  log: Logger;
  redis: RedisClient;
  keys: KeySpace;
  queues: ShardQueues;
  store: RunStore;
  registry: ToolRegistry;
  providers: Map<string, ModelProvider>;
  metrics: Metrics;
  /** Spans (TRACING); `tracing.tracer` is undefined when off. */
  tracing: Tracing;
  close(): Promise<void>;
}

export function buildProviders(cfg: Config): Map<string, ModelProvider> {
  const providers = new Map<string, ModelProvider>();
  if (scriptedModelAllowed(cfg)) providers.set('scripted', new ScriptedProvider());
  providers.set('openai', new OpenAIProvider({ baseUrl: cfg.OPENAI_BASE_URL, model: cfg.OPENAI_MODEL, timeoutMs: cfg.MODEL_TIMEOUT_MS, ...(cfg.OPENAI_API_KEY ? { apiKey: cfg.OPENAI_API_KEY } : {}) }));
  return providers;
}

export async function createContext(cfg: Config, name: string, opts: { log?: Logger; metrics?: Metrics; tracing?: Tracing } = {}): Promise<AppContext> {
  const log = opts.log ?? createLogger(name, cfg.LOG_LEVEL);
  const target = targetOf(cfg);
  const redis = createRedis(target, name);
  // Boot: Redis answers within REDIS_BOOT_TIMEOUT_MS or the process stops naming it (src/bin/boot.ts).
  await waitForRedis(redis, target, cfg.REDIS_BOOT_TIMEOUT_MS);
  redis.on('error', (err) => log.warn({ code: 'redis_error', err }, 'redis connection error'));
  const metrics = opts.metrics ?? newMetrics({ defaultMetrics: true });
  const report = await assertRedisSafe(redis, (m) => log.warn({ code: 'redis_aof_off' }, m));
  metrics.redisConfigOk.set({ check: 'noeviction' }, report.noeviction ? 1 : 0);
  metrics.redisConfigOk.set({ check: 'aof' }, report.aof ? 1 : 0);
  loadScripts(redis);
  const keys = new KeySpace(cfg.KEY_PREFIX, cfg.BULL_PREFIX, cfg.SHARDS);
  const queues = new ShardQueues(keys, redis, (err) => log.warn({ code: 'queue_error', err }, 'queue connection error'));
  const store = new RunStore(redis, keys, queues, cfg.EVENTS_MAX_LEN);
  registerScrapeCollectors(metrics, { redis, keys, queues, log }, { runs: { statuses: RUN_STATUSES, terminal: TERMINAL_STATUSES, retentionMs: cfg.RUN_RETENTION_MS } });
  const tracing = opts.tracing ?? createTracing(cfg, name);
  return {
    cfg, log, redis, keys, queues, store, registry: defaultRegistry({ baseUrl: cfg.SANDBOX_URL }), providers: buildProviders(cfg), metrics, tracing,
    async close() {
      await queues.close();
      redis.disconnect();
      await tracing.shutdown().catch(() => {});
    },
  };
}
