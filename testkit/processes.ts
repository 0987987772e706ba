/**
 * Real worker, API and reconciler processes for crash tests, the chaos campaigns and the benchmarks: spawned with the
 * harness env (src/server/worker, src/server/api through spawnModule), killed with real signals.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { onLines, projectRoot, spawnModule } from './spawnModule.js';
import { until } from './until.js';

export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Date.now() when the exit was seen. */
  at: number;
}

export interface SpawnedProcess {
  child: ChildProcess;
  /** The process itself: the child's pid, or for a worker started by `npm run worker` the node process npm started. */
  pid: number;
  exited: Promise<ProcessExit>;
  /** Set once the process has exited. */
  dead: boolean;
  /** Its log lines (all of them, or with `keep: 'lifecycle'` its start, shutdown and error lines) and stderr. */
  lines: string[];
}

export interface WorkerProcess extends SpawnedProcess {
  /** The crash point it was armed with (CRASH_POINTS), if any. */
  crashPoint?: string;
  /** BullMQ worker ids of this process (from its start line): the prefix of its jobs' lock tokens. */
  bullIds: string[];
}

export interface SpawnOptions {
  /** Until its start line (a loaded machine compiles the sources slowly). Past it the process is SIGKILLed. */
  startTimeoutMs?: number;
  /** Arms the worker (CRASH_POINTS=<point>[@<step>]): it kills itself there, maybe before its start line is read. */
  crashPoint?: string;
  /**
   * What to keep of its log: 'all' (default) for tests that read its lines; 'lifecycle' (start, shutdown, errors, the
   * latest 200) for a campaign whose workers log every step for minutes.
   */
  keep?: 'all' | 'lifecycle';
  /**
   * An exit before the start line: 'throw' (default) with its lines, or 'return' the process as it is (dead), for a
   * campaign whose workers may find Redis restarting and leave, as they must.
   */
  exitBeforeStart?: 'throw' | 'return';
  /** The worker's LOG_LEVEL (default info: its start line is read at that level). */
  logLevel?: 'info' | 'debug' | 'trace';
  /** Flags for Node itself (e.g. --cpu-prof, which NODE_OPTIONS does not take). */
  nodeArgs?: string[];
  /**
   * How the process is started: 'node' (default) runs the module directly (its compiled file when this process runs
   * from dist/); 'npm' runs `npm run worker` in the checkout as the README does (npm, then node with the tsx loader:
   * the sources), and `pid` is the node process's, from its start line. `nodeArgs` apply to 'node' only.
   */
  launch?: 'node' | 'npm';
}

/** Every process started here that has not exited, those still starting included (see killSpawned). */
const running = new Set<SpawnedProcess>();

// The start lines of a worker, an API and a reconciler, its shutdown and its errors.
const LIFECYCLE = /"(worker_started|api_listening|reconciler_started)"|shutdown|forced_exit|error/;
const KEPT_LINES = 200;

function track<T extends object>(child: ChildProcess, keep: 'all' | 'lifecycle', extra: T): SpawnedProcess & T {
  const lines: string[] = [];
  const proc: SpawnedProcess & T = Object.assign(
    { child, pid: child.pid ?? -1, lines, dead: false, exited: undefined as never as Promise<ProcessExit> },
    extra,
  );
  running.add(proc);
  proc.exited = new Promise((resolve) =>
    child.once('exit', (code, signal) => {
      running.delete(proc);
      proc.dead = true;
      resolve({ code, signal, at: Date.now() });
    }),
  );
  onLines(child.stdout!, (line) => {
    if (keep === 'all') return void lines.push(line);
    if (!LIFECYCLE.test(line)) return;
    lines.push(line);
    if (lines.length > KEPT_LINES) lines.splice(1, 1); // keep the start line and the latest
  });
  child.stderr!.on('data', (d: Buffer) => {
    if (keep === 'all' || lines.length < KEPT_LINES) lines.push(`stderr: ${d.toString()}`);
  });
  return proc;
}

/**
 * Waits for a line containing `marker`. An exit first: undefined when `leaving` accepts it, else thrown with the
 * lines; past the deadline the process is SIGKILLed and that is thrown.
 */
async function untilLine(
  proc: SpawnedProcess,
  marker: string,
  what: string,
  timeoutMs: number,
  leaving: (child: ChildProcess) => boolean,
): Promise<string | undefined> {
  const line = () => proc.lines.find((l) => l.includes(marker));
  const gone = () => proc.dead || proc.child.exitCode !== null || proc.child.signalCode !== null;
  await until(`${what}'s ${marker} line or its exit`, timeoutMs, () => line() !== undefined || gone()).catch(() => {});
  const found = line();
  if (found) return found;
  if (gone()) {
    if (leaving(proc.child)) return undefined;
    throw new Error(
      `${what} did not start (exit ${proc.child.exitCode ?? proc.child.signalCode}):\n${proc.lines.join('\n')}`,
    );
  }
  proc.child.kill('SIGKILL');
  throw new Error(`${what} did not start within its start limit:\n${proc.lines.join('\n')}`);
}

/** A worker process (src/server/worker, its metrics on a free port); resolves once it logged its start line. */
export async function spawnWorker(env: Record<string, string>, opts: SpawnOptions = {}): Promise<WorkerProcess> {
  const armed = opts.crashPoint ? { CRASH_POINTS: opts.crashPoint } : {};
  const workerEnv = { WORKER_METRICS_PORT: '0', ...env, ...armed, LOG_LEVEL: opts.logLevel ?? 'info' };
  // Started directly, with an IPC channel as the demo's workers have: a worker leaves when the test process ends,
  // however it ends (a test runner's fork is killed, and a clean-up that missed a worker would leave it serving a
  // Redis the test stopped).
  const child =
    opts.launch === 'npm'
      ? spawn('npm', ['run', '--silent', 'worker'], {
          cwd: projectRoot(),
          env: { ...process.env, ...workerEnv },
          stdio: ['ignore', 'pipe', 'pipe'],
        })
      : spawnModule('src/server/worker', workerEnv, ['ignore', 'pipe', 'pipe', 'ipc'], {
          nodeArgs: opts.nodeArgs ?? [],
        });
  child.channel?.unref();
  const w: WorkerProcess = track(child, opts.keep ?? 'all', {
    bullIds: [] as string[],
    ...(opts.crashPoint ? { crashPoint: opts.crashPoint } : {}),
  });
  // A crash point (armed here or in env) can fire before the start line is read.
  const leaving = (c: ChildProcess) => opts.exitBeforeStart === 'return' || c.signalCode === 'SIGKILL';
  const started = await untilLine(w, '"worker_started"', 'worker', opts.startTimeoutMs ?? 30_000, leaving);
  if (started) {
    const line = JSON.parse(started) as { bullWorkerIds?: string[]; pid?: number };
    w.bullIds = line.bullWorkerIds ?? [];
    if (line.pid !== undefined) w.pid = line.pid;
  }
  return w;
}

/** An API process (src/server/api) on a free port unless env names PORT; resolves with its URL once it listens. */
export async function spawnApi(
  env: Record<string, string>,
  opts: Pick<SpawnOptions, 'startTimeoutMs' | 'keep' | 'nodeArgs'> = {},
): Promise<SpawnedProcess & { url: string }> {
  const child = spawnModule('src/server/api', { PORT: '0', ...env, LOG_LEVEL: 'info' }, ['ignore', 'pipe', 'pipe'], {
    nodeArgs: opts.nodeArgs ?? [],
  });
  const api = track(child, opts.keep ?? 'all', { url: '' });
  const listening = await untilLine(api, '"api_listening"', 'api', opts.startTimeoutMs ?? 90_000, () => false);
  api.url = (JSON.parse(listening!) as { url: string }).url;
  return api;
}

/** A reconciler process (src/server/reconciler); resolves once it logged its start line. */
export async function spawnReconciler(
  env: Record<string, string>,
  opts: Pick<SpawnOptions, 'startTimeoutMs' | 'keep'> = {},
): Promise<SpawnedProcess> {
  const child = spawnModule('src/server/reconciler', { RECONCILER_METRICS_PORT: '0', ...env, LOG_LEVEL: 'info' }, [
    'ignore',
    'pipe',
    'pipe',
  ]);
  const proc = track(child, opts.keep ?? 'all', {});
  await untilLine(proc, '"reconciler_started"', 'reconciler', opts.startTimeoutMs ?? 60_000, () => false);
  return proc;
}

/** SIGKILLs every process of the list still running and empties it (a test's afterEach). */
export function killAll(procs: (ChildProcess | SpawnedProcess)[]): void {
  for (const p of procs.splice(0)) {
    const child = 'child' in p ? p.child : p;
    // A process started through npm: the node process itself, then npm (which does not pass SIGKILL on).
    if ('child' in p && p.pid !== child.pid) killPid(p.pid);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}

/** SIGKILL to a pid that may be gone already. */
export function killPid(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // gone already
  }
}

/**
 * SIGKILLs every process started here that still runs and waits for their exits: those still starting too, which no
 * list of the test's holds yet (a replacement a kill loop started just before its end). A test's last clean-up,
 * before it stops the Redis they use.
 */
export async function killSpawned(): Promise<void> {
  const left = [...running];
  killAll([...left]);
  await Promise.all(left.map((p) => p.exited));
}

/**
 * Whether the process is stopped (SIGSTOP, or a pause point armed with `stop`): `ps` shows its state as T. A process
 * gone is not stopped.
 */
export function isStopped(pid: number): boolean {
  try {
    return execFileSync('ps', ['-o', 'stat=', '-p', String(pid)], { encoding: 'utf8' })
      .trim()
      .startsWith('T');
  } catch {
    return false; // ps exits 1 for a pid it does not find
  }
}
