/**
 * A server a test spawns on a free loopback port with its data in a temp dir, and may kill (a crash, a shutdown) and
 * start again on the same port and dir: the handle embeddedRedis (redis-server) and embeddedPostgres (postgres) share.
 */
import type { ChildProcess } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { until } from './until.js';

export interface SpawnedServer {
  url: string;
  port: number;
  dir: string;
  process?: ChildProcess;
  /** Stops the server (by default its own shutdown signal; SIGKILL: a crash) and keeps its data dir. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Starts it again on the same port and dir (its log or WAL replayed). */
  restart(): Promise<void>;
  /** Stops it and removes its dir. */
  stop(): Promise<void>;
}

export interface ServerSpec {
  url: string;
  port: number;
  dir: string;
  /** Starts the server process (again, on restart). */
  spawn(): ChildProcess;
  /** Resolves once the server answers. */
  ready(): Promise<void>;
  /** kill()'s signal by default (restart's too): the server's own orderly shutdown. */
  killSignal: NodeJS.Signals;
  /** stop()'s signal. */
  stopSignal: NodeJS.Signals;
}

/**
 * The servers the tests started whose process is running (these and testkit/redisNode.ts's): one exit listener kills
 * them all, where a listener per server would pile up in a test worker that runs many files (and keep every server's
 * handle alive).
 */
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/** A server's process, killed with the test process however the test ends. */
export function tracked(child: ChildProcess): ChildProcess {
  live.add(child);
  child.once('exit', () => live.delete(child));
  return child;
}

/** Spawns the server and resolves once it answers; the test process's exit kills it, however the test ended. */
export async function startSpawnedServer(spec: ServerSpec): Promise<SpawnedServer> {
  const handle: SpawnedServer = {
    url: spec.url,
    port: spec.port,
    dir: spec.dir,
    async kill(signal = spec.killSignal) {
      const p = handle.process;
      // A process killed by a signal has a signalCode and no exitCode: it is gone too.
      if (!p || p.exitCode !== null || p.signalCode !== null) return;
      await new Promise<void>((resolve) => {
        p.once('exit', () => resolve());
        p.kill(signal);
      });
    },
    async restart() {
      await handle.kill();
      handle.process = tracked(spec.spawn());
      await readyOrExited(spec, handle.process);
    },
    async stop() {
      await handle.kill(spec.stopSignal);
      rmSync(spec.dir, { recursive: true, force: true });
    },
  };
  handle.process = tracked(spec.spawn());
  await readyOrExited(spec, handle.process);
  return handle;
}

/** A server whose process ended before it answered (its port taken meanwhile, a bad argument). */
export class ExitedAtStart extends Error {}

/** The last lines of a server's log file, for an error that names why it stopped; '(no log)' when there is none. */
export function lastLines(file: string, n = 5): string {
  try {
    return readFileSync(file, 'utf8').trim().split('\n').slice(-n).join('\n');
  } catch {
    return '(no log)';
  }
}

/**
 * Resolves once the server answers; a server that exits first (its port taken, a bad argument) fails the start at
 * once, naming its exit, where waiting for an answer would time out saying nothing.
 */
async function readyOrExited(spec: ServerSpec, child: ChildProcess): Promise<void> {
  let onExit: (() => void) | undefined;
  const exited = new Promise<never>((_resolve, reject) => {
    onExit = () => reject(new ExitedAtStart(`${spec.url} exited at start (${child.exitCode ?? child.signalCode})`));
    child.once('exit', onExit);
  });
  try {
    await Promise.race([spec.ready(), exited]);
  } finally {
    child.off('exit', onExit!);
  }
}

/** Tries `attempt` (a fresh connection and a query) until it resolves; past `timeoutMs`, fails with its last error. */
export async function untilAnswers(what: string, timeoutMs: number, attempt: () => Promise<unknown>): Promise<void> {
  let lastErr: unknown;
  const answered = () =>
    attempt().then(
      () => true,
      (e: unknown) => ((lastErr = e), false),
    );
  await until(what, timeoutMs, answered, 25).catch(() => {
    throw new Error(`${what} did not answer: ${String(lastErr)}`);
  });
}
