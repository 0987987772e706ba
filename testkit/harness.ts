/**
 * Test harness: a unique key prefix per test context on the suite's real
 * Redis, the real sandbox over HTTP, real workers, real API over HTTP.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { inject } from 'vitest';
import { Redis } from 'ioredis';
import { deletePrefix, uniquePrefix } from './keyPrefix.js';
import { loadConfig, type Config } from '../src/config/config.js';
import { createContext } from '../src/server/buildContext.js';
import type { EngineContext } from '../src/runs/engineContext.js';
import { createLogger } from '../src/metrics/log.js';
import { newMetrics } from '../src/metrics/metrics.js';
import { FleetWorker, type FleetWorkerOptions } from '../src/worker/fleetWorker.js';
import { createFullApi } from '../src/http/fullApi.js';
import { createEffectRunner } from '../src/ledger/runner.js';
import { startSandbox, type SandboxHandle } from '../sandbox/server.js';
import type { Tool } from '../src/core/tool.js';
import { until } from './until.js';

export function redisUrl(): string {
  return inject('redisUrl');
}

export { uniquePrefix } from './keyPrefix.js';

/**
 * The producer token every harness configures (run routes are closed without one):
 * send `producerAuth` with POST /v1/runs and the run views.
 */
export const PRODUCER_TOKEN = 'producer-token-for-tests';
export const producerAuth = { authorization: `Bearer ${PRODUCER_TOKEN}` };

export interface Harness {
  cfg: Config;
  ctx: EngineContext;
  sandbox: SandboxHandle;
  env: Record<string, string>;
  startWorker(opts?: FleetWorkerOptions, ctxOverride?: EngineContext): Promise<FleetWorker>;
  /**
   * The full API on a free port, on `ctxOverride` (a context of the test's own agents) or the harness's context. The
   * server is closed with the harness; a context is closed with it when it was given to startWorker.
   */
  startApi(ctxOverride?: EngineContext): Promise<{ url: string; server: Server }>;
  waitForStatus(runId: string, statuses: string[], timeoutMs?: number): Promise<string>;
  /**
   * Resolves once no job of the run is waiting, delayed, prioritized or active: nothing of the run can run any
   * more, so nothing more of it can reach a service. A test proves "nothing more happens" with this barrier,
   * never with a pause.
   */
  untilNoJob(runId: string, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export async function createHarness(name: string, env: Record<string, string> = {}): Promise<Harness> {
  const sandbox = await startSandbox({ port: 0 });
  const prefix = uniquePrefix(name);
  const fullEnv = {
    REDIS_URL: redisUrl(),
    KEY_PREFIX: prefix,
    BULL_PREFIX: `${prefix}b`,
    SANDBOX_URL: sandbox.url,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    RETRY_BASE_MS: '5',
    RETRY_MAX_MS: '50',
    // In-process workers share the test runner's event loop on a loaded 2-core box: a longer lock than
    // the shipped 1.2 s keeps exact-count assertions free of false-stall redeliveries. Crash tests set their own.
    LOCK_DURATION_MS: '2000',
    STALLED_INTERVAL_MS: '1000',
    PRODUCER_TOKEN,
    // Flow control is on by default; the engine's tests that do not test it say so here, explicitly (the flow tests,
    // and any test passing FLOW_CONTROL, set it on).
    FLOW_CONTROL: 'false',
    ...env,
  };
  const cfg = loadConfig(fullEnv);
  const log = createLogger(name, cfg.LOG_LEVEL);
  const ctx = await createContext(cfg, name, { log, metrics: newMetrics() });
  const workers: FleetWorker[] = [];
  const servers: Server[] = [];
  const extraCtx: EngineContext[] = [];
  return {
    cfg,
    ctx,
    sandbox,
    env: fullEnv,
    async startWorker(opts = {}, ctxOverride) {
      const c = ctxOverride ?? ctx;
      const w = new FleetWorker(c, { effects: createEffectRunner(c), ...opts });
      await w.start();
      workers.push(w);
      if (ctxOverride) extraCtx.push(ctxOverride);
      return w;
    },
    async startApi(ctxOverride) {
      const app = createFullApi(ctxOverride ?? ctx, () => true);
      const server = await new Promise<Server>((resolve) => {
        const s = app.listen(0, '127.0.0.1', () => resolve(s));
      });
      servers.push(server);
      return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
    },
    async waitForStatus(runId, statuses, timeoutMs = 30_000) {
      let last = '';
      const reached = async () => {
        last = (await ctx.redis.hget(ctx.keys.run(runId).run, 'status')) ?? '';
        return statuses.includes(last) && last;
      };
      return await until(`run ${runId} ${statuses.join('|')}`, timeoutMs, reached).catch(() => {
        throw new Error(`run ${runId} stayed '${last}', expected ${statuses.join('|')}`);
      });
    },
    async untilNoJob(runId, timeoutMs = 10_000) {
      const queue = ctx.queues.forRun(runId);
      await until(`no job of run ${runId} left to run`, timeoutMs, async () => {
        const jobs = await queue.getJobs(['active', 'waiting', 'delayed', 'prioritized', 'waiting-children']);
        return !jobs.some((j) => j?.id?.startsWith(`${runId}.`));
      });
    },
    async close() {
      await Promise.all(workers.map((w) => w.stop(true)));
      for (const s of servers) s.close();
      await sandbox.close();
      const scan = new Redis(redisUrl());
      for (const p of [prefix, `${prefix}b`]) await deletePrefix(scan, p);
      scan.disconnect();
      for (const c of extraCtx) await c.close();
      await ctx.close();
    },
  };
}

/** A tool of the support agent (the harness's default agent), as the engine holds it. */
export function supportTool(ctx: EngineContext, name: string): Tool | undefined {
  return ctx.agents.get('support')?.tools.get(name);
}

export const sampleTicket = (id = 'T-1') => ({
  id,
  subject: 'My order arrived broken',
  body: 'The mug was shattered when I opened the box.',
  customer: { email: 'ada@example.com', name: 'Ada' },
});
