/**
 * Everything a scenario runs against, started by the scenario itself: a real
 * redis-server on a free port (AOF always), the sandbox service behind a wire
 * tap, the HTTP API (runs are created with a real POST /v1/runs) and real
 * worker processes. `stop()` takes all of it down again, also after an error.
 */
import type { ChildProcess } from 'node:child_process';
import type { Server } from 'node:http';
import { createContext } from '../../../src/server/buildContext.js';
import type { EngineContext } from '../../../src/runs/engineContext.js';
import { onLines, spawnModule } from '../../../testkit/spawnModule.js';
import { loadConfig } from '../../../src/config/config.js';
import { createLogger } from '../../../src/metrics/log.js';
import { newMetrics } from '../../../src/metrics/metrics.js';
import { createFullApi } from '../../../src/http/fullApi.js';
import { startEmbeddedRedis, type EmbeddedRedis } from '../../../testkit/embeddedRedis.js';
import { startSandbox, type SandboxHandle } from '../../../sandbox/server.js';
import type { FaultRule } from '../../../sandbox/types.js';
import { settledWithin, withTimeout } from '../../../src/core/timeout.js';
import { until } from '../../../testkit/until.js';
import { startTap, type Tap } from './tap.js';
import { describeTap, SCENARIO_TOKEN, type Timeline } from './timeline.js';

/** A request to the scenario's own API or a worker's /metrics that gets no answer fails instead of hanging the scenario. */
const HTTP_TIMEOUT_MS = 10_000;

/** One parsed pino line of a worker. */
export interface WorkerLogLine {
  time: number;
  level: number;
  code?: string;
  msg?: string;
  runId?: string;
  step?: number;
  [k: string]: unknown;
}

export interface ScenarioWorker {
  label: string;
  pid: number;
  child: ChildProcess;
  metricsPort?: number;
  logs: WorkerLogLine[];
  stderr: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
  dead: boolean;
  /** Signal sent by the scenario (anything else that ends the process is unexpected). */
  sent?: NodeJS.Signals;
}

export interface StackOptions {
  timeline: Timeline;
  /** Extra environment of the worker processes (and of the API's config). */
  env?: Record<string, string>;
  workers: number;
  /** Sandbox fault rules, set before any run exists. */
  faults?: FaultRule[];
  /** Progress lines while the scenario runs (the CLI prints them on stderr). */
  progress?: (line: string) => void;
  /** Show reads of kb/customers in the timeline only when they were slow or failed. Default true. */
  quietReads?: boolean;
}

/** GET /v1/runs/:id, as the scenarios read it. */
export interface RunViewJson {
  runId: string;
  status: string;
  reason: string;
  step: number;
  budget: { limits: { maxSteps: number; maxTokens: number }; used: { steps: number; tokens: number; wallMs: number } };
  transcript: { kind: string; step: number; [k: string]: unknown }[];
  effects: EffectJson[];
}

export interface HistoryJson {
  from: string | null;
  to: string;
  at: number;
  by: string;
  why: string;
  evidence?: unknown;
}

export interface EffectJson {
  actionId: string;
  tool: string;
  state: string;
  step: number;
  receipt?: string;
  idempotencyKey: string;
  attempts: number;
  repeats: number;
  history: HistoryJson[];
}

export interface Stack {
  timeline: Timeline;
  redis: EmbeddedRedis;
  sandbox: SandboxHandle;
  tap: Tap;
  apiUrl: string;
  ctx: EngineContext;
  workers: ScenarioWorker[];
  /** Unexpected process exits and similar problems seen while running. */
  problems: string[];
  createRun(body: unknown): Promise<string>;
  view(runId: string): Promise<RunViewJson>;
  /** Sends a signal to a worker and records it. */
  signal(w: ScenarioWorker, sig: NodeJS.Signals, why: string): void;
  stop(): Promise<void>;
}

/** Stacks not yet stopped: the CLI stops them on Ctrl-C. */
export const liveStacks = new Set<Stack>();

const READS = /^\/v1\/(kb|customers)\b/;

export async function startStack(opts: StackOptions): Promise<Stack> {
  const tl = opts.timeline;
  const progress = opts.progress ?? (() => {});
  const cleanups: (() => Promise<unknown>)[] = [];
  const runCleanups = async () => {
    for (const c of cleanups.splice(0).reverse()) {
      try {
        await c();
      } catch {
        // keep stopping the rest
      }
    }
  };
  try {
    progress('starting redis-server, sandbox, API and workers');
    const redis = await startEmbeddedRedis({ appendfsync: 'always' });
    cleanups.push(() => redis.stop());
    tl.add(Date.now(), 'scenario', `redis-server up at ${redis.url} (AOF always, noeviction)`);

    const sandbox = await startSandbox({ port: 0, seed: 1 });
    cleanups.push(() => sandbox.close());
    if (opts.faults?.length) sandbox.setFaults(opts.faults);
    const quietReads = opts.quietReads ?? true;
    const tap = await startTap(sandbox.url, (r) => {
      const path = r.url.split('?')[0] ?? '';
      if (quietReads && READS.test(path) && r.outcome === 'answered' && r.status === 200 && r.end - r.start < 500)
        return;
      tl.add(r.end, 'sandbox', describeTap(r));
    });
    cleanups.push(() => tap.close());
    tl.add(
      Date.now(),
      'scenario',
      `sandbox up (workers reach it through a wire tap)${opts.faults?.length ? `, faults: ${opts.faults.map(describeFault).join('; ')}` : ''}`,
    );

    // One environment for the API and the workers; anything that would make them disagree is pinned.
    const env: Record<string, string> = {
      APP_MODE: 'development',
      REDIS_URL: redis.url,
      REDIS_CLUSTER_NODES: '',
      KEY_PREFIX: 'agent',
      BULL_PREFIX: 'bull',
      SHARDS: '1',
      WORKER_SHARDS: '',
      SANDBOX_URL: tap.url,
      MODEL_PROVIDER: 'scripted',
      CRASH_POINTS: '',
      UNSAFE_DISABLE_IDEMPOTENCY: 'false',
      PRODUCER_TOKEN: SCENARIO_TOKEN,
      OPERATOR_TOKEN: '',
      TENANT_TOKENS: '',
      APPROVAL_RULES: '',
      TENANT_DAILY_TOKENS: '0',
      WORKER_METRICS_PORT: '0',
      ...opts.env,
    };
    const cfg = loadConfig({ ...process.env, ...env, LOG_LEVEL: 'silent', PORT: '0', HOST: '127.0.0.1' });
    const ctx = await createContext(cfg, 'scenario', {
      log: createLogger('scenario', 'silent'),
      metrics: newMetrics(),
    });
    cleanups.push(() => ctx.close());
    const app = createFullApi(ctx, () => true);
    const server = await new Promise<Server>((resolve, reject) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
      s.once('error', reject);
    });
    cleanups.push(
      () =>
        new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        }),
    );
    const addr = server.address();
    const apiUrl = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
    tl.add(Date.now(), 'scenario', `API up at ${apiUrl}`);

    const problems: string[] = [];
    const workers: ScenarioWorker[] = [];
    cleanups.push(() => stopWorkers(workers));
    const labels = 'ABCDEFGH';
    const spawned = await Promise.all(
      Array.from({ length: opts.workers }, (_, i) => spawnWorker(labels[i] ?? String(i), env, problems)),
    );
    for (const w of spawned) {
      workers.push(w);
      tl.add(Date.now(), `worker ${w.label}`, `worker process started (pid ${w.pid})`);
    }
    progress(`${workers.length} worker process(es) up: ${workers.map((w) => `${w.label}=${w.pid}`).join(', ')}`);

    const stack: Stack = {
      timeline: tl,
      redis,
      sandbox,
      tap,
      apiUrl,
      ctx,
      workers,
      problems,
      async createRun(body) {
        const sent = Date.now();
        const { res, json } = await withTimeout(HTTP_TIMEOUT_MS, undefined, async (signal) => {
          const res = await fetch(`${apiUrl}/v1/runs`, {
            method: 'POST',
            signal,
            headers: { 'content-type': 'application/json', authorization: `Bearer ${SCENARIO_TOKEN}` },
            body: JSON.stringify(body),
          });
          return { res, json: (await res.json()) as { runId?: string; fields?: unknown } };
        });
        if (res.status !== 201 || !json.runId)
          throw new Error(`POST /v1/runs answered ${res.status}: ${JSON.stringify(json)}`);
        tl.add(sent, 'api', `POST /v1/runs -> 201 run ${json.runId} (${Date.now() - sent} ms)`);
        return json.runId;
      },
      async view(runId) {
        return withTimeout(HTTP_TIMEOUT_MS, undefined, async (signal) => {
          const res = await fetch(`${apiUrl}/v1/runs/${encodeURIComponent(runId)}`, {
            signal,
            headers: { authorization: `Bearer ${SCENARIO_TOKEN}` },
          });
          if (!res.ok) throw new Error(`GET /v1/runs/${runId} answered ${res.status}`);
          return (await res.json()) as RunViewJson;
        });
      },
      signal(w, sig, why) {
        w.sent = sig;
        tl.add(Date.now(), 'scenario', `${sig} -> worker ${w.label} (pid ${w.pid}): ${why}`);
        w.child.kill(sig);
      },
      async stop() {
        if (!liveStacks.has(stack)) return;
        liveStacks.delete(stack);
        tl.add(Date.now(), 'scenario', 'stopping: SIGTERM to the workers, then the API, the sandbox and redis-server');
        await runCleanups();
      },
    };
    liveStacks.add(stack);
    return stack;
  } catch (err) {
    await runCleanups();
    throw err;
  }
}

function describeFault(f: FaultRule): string {
  return [
    f.kind,
    f.resource ?? 'all effects',
    f.count !== undefined ? `x${f.count}` : '',
    f.ms !== undefined ? `${f.ms} ms` : '',
  ]
    .filter(Boolean)
    .join(' ');
}

async function spawnWorker(label: string, env: Record<string, string>, problems: string[]): Promise<ScenarioWorker> {
  const child = spawnModule('src/server/worker', { ...env, LOG_LEVEL: 'debug' }, ['ignore', 'pipe', 'pipe']);
  const w: ScenarioWorker = {
    label,
    pid: child.pid ?? -1,
    child,
    logs: [],
    stderr: [],
    dead: false,
    exited: undefined as never,
  };
  w.exited = new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      w.dead = true;
      if (w.sent === undefined)
        problems.push(
          `worker ${label} (pid ${w.pid}) exited on its own: code=${code} signal=${signal} ${w.stderr.join('').slice(-300)}`,
        );
      resolve({ code, signal, at: Date.now() });
    });
  });
  onLines(child.stdout!, (line) => {
    try {
      const parsed = JSON.parse(line) as WorkerLogLine;
      if (parsed.code === 'worker_started' && typeof parsed.metricsPort === 'number')
        w.metricsPort = parsed.metricsPort;
      if (w.logs.length < 5000) w.logs.push(parsed);
    } catch {
      // not a log line
    }
  });
  child.stderr!.on('data', (d: Buffer) => {
    if (w.stderr.length < 200) w.stderr.push(d.toString());
  });
  await until(`worker ${label} started or gone`, 45_000, () => w.metricsPort !== undefined || w.dead).catch(() => {});
  if (w.metricsPort !== undefined) return w;
  if (!w.dead) {
    w.sent = 'SIGKILL';
    child.kill('SIGKILL');
  }
  throw new Error(`worker ${label} did not start: ${w.stderr.join('').slice(-500)}`);
}

/** SIGTERM (graceful) to every live worker, SIGKILL whatever is still alive after 10 s. */
async function stopWorkers(workers: ScenarioWorker[]): Promise<void> {
  const live = workers.filter((w) => !w.dead);
  for (const w of live) {
    w.sent ??= 'SIGTERM';
    w.child.kill('SIGTERM');
  }
  await settledWithin(Promise.all(live.map((w) => w.exited)), 10_000);
  for (const w of live) if (!w.dead) w.child.kill('SIGKILL');
  await Promise.all(live.map((w) => w.exited));
}

/** Steps started minus steps committed, from a worker's /metrics: what it holds right now. */
export async function stepsInFlight(w: ScenarioWorker): Promise<number> {
  if (w.dead || w.metricsPort === undefined) return 0;
  try {
    const text = await withTimeout(HTTP_TIMEOUT_MS, undefined, async (signal) =>
      (await fetch(`http://127.0.0.1:${w.metricsPort}/metrics`, { signal })).text(),
    );
    const value = (name: string) => Number(new RegExp(`^${name} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
    return value('agent_steps_started_total') - value('agent_steps_committed_total');
  } catch {
    return 0;
  }
}
