/**
 * The common shape of a benchmark section and of its result. A section is one
 * file in bench/sections/ exporting a `Section`; register it in
 * bench/sections/index.ts and `npm run bench -- --only=<name>` runs it.
 */
import type { Redis } from 'ioredis';
import type { EngineContext } from '../../src/runs/engineContext.js';
import type { Config } from '../../src/config/config.js';
import type { EmbeddedRedis } from '../../testkit/embeddedRedis.js';
import type { SandboxHandle } from '../../sandbox/server.js';
import type { WorkerPool } from './pool.js';

export interface BenchOptions {
  /** Small sizes: the whole bench in well under a minute. */
  quick: boolean;
  /** The sizes an issue names (e.g. a 5,000-run burst): longer than the default sizes, which fit a few minutes. */
  fullSize?: boolean;
  /** Measurement rounds per comparison (median reported). */
  rounds: number;
  /** Write V8 CPU profiles of the worker child processes to this directory. */
  cpuProfDir?: string;
  /** Sample the worker children's allocations round by round into this directory (bench/lib/heapprof.ts). */
  allocProfDir?: string;
  /** More node flags for the worker children (e.g. --trace-gc-nvp: bench/gcTrace.ts). */
  workerNodeFlags?: string[];
}

export interface Metric {
  /** Stable machine key (JSON). */
  key: string;
  /** Human label (table). */
  label: string;
  value: number;
  unit: string;
  /** Printed next to the figure, e.g. ">= 0.9". */
  target?: string;
  /** Only set when there is a target. */
  met?: boolean;
  /** Short note for the table (e.g. the per-round values). */
  note?: string;
}

export interface SectionResult {
  name: string;
  title: string;
  metrics: Metric[];
  /** Extra tables printed after the metrics (rows of cells). */
  tables?: { title: string; header: string[]; rows: (string | number)[][] }[];
  /** Anything else worth keeping in the JSON (raw per-round figures, breakdowns). */
  details?: Record<string, unknown>;
  durationMs?: number;
  error?: string;
}

/** What every section gets: the bench's own Redis and sandbox, a context on them, a pool factory. */
export interface BenchEnv {
  redis: EmbeddedRedis;
  sandbox: SandboxHandle;
  /** The env every bench process uses (REDIS_URL, prefixes, SANDBOX_URL, limits). */
  appEnv: Record<string, string>;
  cfg: Config;
  /** A context in the bench process (creating runs, reading state, in-process workers). */
  ctx: EngineContext;
  /** A separate admin connection (INFO, FLUSHALL): never shared with the measured clients. */
  admin: Redis;
  /** Spawns `n` worker child processes (stopped by the bench on exit, even on error). */
  spawnPool(n: number, extraEnv?: Record<string, string>): Promise<WorkerPool>;
  /** Empties the bench Redis (scripts stay cached) and the sandbox. */
  reset(): Promise<void>;
  /** Registers a cleanup that runs at the end (or on error / signal), last registered first. */
  onCleanup(fn: () => Promise<void> | void): void;
}

export interface Section {
  name: string;
  title: string;
  run(env: BenchEnv, opts: BenchOptions): Promise<SectionResult>;
}

export function metric(m: Metric): Metric {
  return m;
}

/** A metric with a lower bound target. */
export function atLeast(key: string, label: string, value: number, unit: string, min: number, note?: string): Metric {
  return { key, label, value, unit, target: `>= ${min}`, met: value >= min, ...(note ? { note } : {}) };
}

/** A metric with an upper bound target. */
export function atMost(key: string, label: string, value: number, unit: string, max: number, note?: string): Metric {
  return { key, label, value, unit, target: `<= ${max}`, met: value <= max, ...(note ? { note } : {}) };
}
