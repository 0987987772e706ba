/**
 * createFleet: the same components the entry points start (api, worker,
 * reconciler), in one process, for a team that embeds the fleet instead of
 * running `npm run api|worker|reconciler`. Thin on purpose: each part is what
 * the matching src/server file builds, over one context.
 */
import { createServer, type Server } from 'node:http';
import { loadConfig, type Config } from '../config/config.js';
import type { Agent } from '../core/agent.js';
import type { ModelProvider } from '../core/model.js';
import { approvalPolicy } from '../ledger/approvals.js';
import { Reconciler } from '../ledger/reconciler.js';
import { archiverFor } from './archiving.js';
import type { Archiver } from '../archive/archiver.js';
import { createEffectRunner } from '../ledger/runner.js';
import type { EngineContext } from '../runs/engineContext.js';
import { FleetWorker } from '../worker/fleetWorker.js';
import { Schedules, startScheduleWorker } from '../producer/schedules.js';
import { warmUpModelCalls } from '../models/warmUp.js';
import { listen } from './boot.js';
import { createContext } from './buildContext.js';

export interface FleetOptions {
  /** The agents this fleet runs (made by defineAgent). */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  agents: readonly Agent<any>[];
  /** Model providers by name; default: the configured ones (scripted in development, openai). */
  providers?: Map<string, ModelProvider> | Record<string, ModelProvider>;
  /** The configuration: a frozen Config, or raw settings read like the environment (default: process.env). */
  config?: Config | Record<string, string | undefined>;
  /** Shorthand for config REDIS_URL. */
  redis?: string;
  /** Names the process in logs and Redis client names (default `fleet`). */
  name?: string;
}

/** A part the fleet started: stop() ends it (a worker hands its held jobs back first). */
export interface Started {
  stop(): Promise<void>;
}

export interface Fleet {
  /** The names of the agents this fleet runs. */
  agents: readonly string[];
  api: {
    /** Serves the HTTP API (runs, operators, webhooks, /metrics) on port (default PORT) and host (default HOST). */
    listen(port?: number, host?: string): Promise<{ url: string; server: Server }>;
  };
  worker: {
    /** Starts consuming steps (WORKER_SHARDS, WORKER_CONCURRENCY); stop() hands held jobs back. */
    start(): Started;
  };
  reconciler: {
    /** Starts the sweeping reconciler (one sweeper at a time across the fleet); sweep() runs one pass now. */
    start(): Started & Pick<Reconciler, 'sweep'>;
  };
  /** Stops what was started (workers hand their jobs back), then closes connections. */
  close(): Promise<void>;
}

function configOf(opts: FleetOptions): Config {
  const given = opts.config;
  if (given && Object.isFrozen(given) && 'SHARDS' in given) return given as Config;
  const env = {
    ...((given as Record<string, string | undefined> | undefined) ?? process.env),
    ...(opts.redis ? { REDIS_URL: opts.redis } : {}),
  };
  return loadConfig(env);
}

/** The engine's context behind a fleet, for this repository's own tests; never part of the package's surface. */
const contexts = new WeakMap<Fleet, EngineContext>();
export function fleetContext(fleet: Fleet): EngineContext {
  const ctx = contexts.get(fleet);
  if (!ctx) throw new Error('not a fleet made by createFleet');
  return ctx;
}

export async function createFleet(opts: FleetOptions): Promise<Fleet> {
  const cfg = configOf(opts);
  const providers =
    opts.providers instanceof Map
      ? opts.providers
      : opts.providers
        ? new Map(Object.entries(opts.providers))
        : undefined;
  const ctx = await createContext(cfg, opts.name ?? 'fleet', {
    agents: opts.agents,
    ...(providers ? { providers } : {}),
  });
  const servers: Server[] = [];
  const workers: FleetWorker[] = [];
  const reconcilers: Reconciler[] = [];
  const archivers: Archiver[] = [];
  const tickers: { close(): Promise<void> }[] = [];
  let ready = true;
  const fleet: Fleet = {
    agents: ctx.agents.names,
    api: {
      async listen(port = cfg.PORT, host = cfg.HOST) {
        // Loaded here, not at the top: a worker that imports the engine by name (an agents module does) then boots
        // without the HTTP stack (express, the queue board, the OpenAPI document) it never serves.
        const { createFullApi } = await import('../http/fullApi.js');
        const server = createServer(createFullApi(ctx, () => ready));
        const bound = await listen(server, port, host, 'PORT');
        servers.push(server);
        return { url: `http://${host}:${bound}`, server };
      },
    },
    worker: {
      start() {
        const w = new FleetWorker(ctx, {
          effects: createEffectRunner(ctx, { approvals: approvalPolicy(cfg.APPROVAL_RULES) }),
        });
        // It names its lock tokens after its Redis connection (one round trip) and then runs; a Redis gone at that
        // moment is logged, and the worker takes no job (ready stays false).
        w.start().catch((err: unknown) =>
          ctx.log.error({ code: 'worker_start_failed', err }, 'worker could not start'),
        );
        workers.push(w);
        // The first model call made ready as `npm run worker` does at boot; here beside the start (never rejects).
        void warmUpModelCalls(ctx.providers, ctx.log);
        tickers.push(startScheduleWorker(ctx, new Schedules(ctx)));
        return w;
      },
    },
    reconciler: {
      start() {
        const r = new Reconciler(ctx);
        r.start();
        reconcilers.push(r);
        // With an archive, ended runs are archived by the same process that sweeps.
        const a = archiverFor(ctx);
        a?.start();
        if (a) archivers.push(a);
        return r;
      },
    },
    async close() {
      ready = false;
      await Promise.all([
        ...workers.map((w) => w.stop()),
        ...reconcilers.map((r) => r.stop()),
        ...archivers.map((a) => a.stop()),
        ...tickers.map((t) => t.close()),
      ]);
      await Promise.all(servers.map((s) => new Promise((res) => s.close(() => res(undefined)))));
      await ctx.close();
    },
  };
  contexts.set(fleet, ctx);
  return fleet;
}
