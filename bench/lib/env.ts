/**
 * The bench's own world: an embedded redis-server (AOF everysec, noeviction,
 * never the shared Redis at 6379), the sandbox service on loopback, a context,
 * an admin connection, worker pools; all stopped by `cleanup()`, also on error.
 */
import { Redis } from 'ioredis';
import { BULL_EVENTS_MAX_LEN } from '../../src/store/queues.js';
import { loadConfig } from '../../src/config/config.js';
import { createContext } from '../../src/server/buildContext.js';
import { createLogger } from '../../src/metrics/log.js';
import { newMetrics } from '../../src/metrics/metrics.js';
import { startEmbeddedRedis } from '../../testkit/embeddedRedis.js';
import { startSandbox } from '../../sandbox/server.js';
import type { BenchEnv, BenchOptions } from './types.js';
import { WorkerPool } from './pool.js';
import { ALLOC_PROFILE_ENV } from './heapprof.js';

export interface OwnedEnv extends BenchEnv {
  cleanup(): Promise<void>;
}

export async function createBenchEnv(opts: BenchOptions): Promise<OwnedEnv> {
  const cleanups: (() => Promise<void> | void)[] = [];
  const onCleanup = (fn: () => Promise<void> | void) => {
    cleanups.push(fn);
  };
  let cleaned: Promise<void> | undefined;
  const cleanup = () => {
    cleaned ??= (async () => {
      for (const fn of cleanups.reverse()) {
        try {
          await fn();
        } catch (e) {
          console.error(`[bench] cleanup: ${(e as Error).message}`);
        }
      }
    })();
    return cleaned;
  };
  try {
    const redis = await startEmbeddedRedis({ appendfsync: 'everysec' });
    onCleanup(() => redis.stop());
    const sandbox = await startSandbox({ port: 0 });
    onCleanup(() => sandbox.close());
    const appEnv: Record<string, string> = {
      APP_MODE: 'development',
      REDIS_URL: redis.url,
      KEY_PREFIX: 'bench',
      BULL_PREFIX: 'benchq',
      SANDBOX_URL: sandbox.url,
      LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
      WORKER_CONCURRENCY: '20',
      // stepcost runs 1,000+ steps of 20 KB observations: ~5,000 context tokens per step.
      LIMIT_MAX_STEPS: '2000',
      LIMIT_MAX_TOKENS: '50000000',
    };
    const cfg = loadConfig(appEnv);
    const ctx = await createContext(cfg, 'bench', { log: createLogger('bench', cfg.LOG_LEVEL), metrics: newMetrics() });
    onCleanup(() => ctx.close());
    const admin = new Redis(redis.url, { maxRetriesPerRequest: null, connectionName: 'bench-admin' });
    onCleanup(() => admin.disconnect());
    const childEnv: Record<string, string> = {
      ...(process.env.PATH ? { PATH: process.env.PATH } : {}),
      ...(process.env.HOME ? { HOME: process.env.HOME } : {}),
      ...appEnv,
    };
    return {
      redis,
      sandbox,
      appEnv,
      cfg,
      ctx,
      admin,
      onCleanup,
      cleanup,
      async spawnPool(n: number, extraEnv: Record<string, string> = {}) {
        const execArgv = [
          ...(opts.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${opts.cpuProfDir}`] : []),
          ...(opts.workerNodeFlags ?? []),
        ];
        const allocEnv: Record<string, string> = opts.allocProfDir ? { [ALLOC_PROFILE_ENV]: opts.allocProfDir } : {};
        const pool = await WorkerPool.start(n, { env: { ...childEnv, ...allocEnv, ...extraEnv }, execArgv });
        onCleanup(() => pool.kill());
        return pool;
      },
      async reset() {
        await admin.flushall();
        // A BullMQ Queue writes its meta (the event stream cap) when it is constructed; FLUSHALL removes it, and
        // without it BullMQ's scripts fall back to 10,000 events: write it back as the queues would.
        for (const shard of ctx.keys.allShards())
          await admin.hset(ctx.keys.queueStateKeys(shard).meta, 'opts.maxLenEvents', BULL_EVENTS_MAX_LEN);
        // Start every round with a near-empty AOF: otherwise the AOF of earlier rounds
        // grows past auto-aof-rewrite-min-size (64 MB) and a rewrite (a fork, on 2 cores)
        // lands inside some measured round.
        await admin.bgrewriteaof().catch(() => undefined);
        for (let i = 0; i < 500; i++) {
          const p = await admin.info('persistence');
          if (/aof_rewrite_in_progress:0/.test(p) && /aof_rewrite_scheduled:0/.test(p)) break;
          await new Promise((r) => setTimeout(r, 10));
        }
        sandbox.reset();
      },
    };
  } catch (e) {
    await cleanup();
    throw e;
  }
}
