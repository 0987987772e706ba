/** Real worker processes for crash tests: spawned with the harness env, killed with real signals. */
import type { ChildProcess } from 'node:child_process';
import { onLines, spawnModule } from './spawnModule.js';

export interface WorkerProcess {
  child: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  lines: string[];
}

/** startTimeoutMs: until its start line (a loaded machine compiles the sources slowly). */
export async function spawnWorker(env: Record<string, string>, startTimeoutMs = 30_000): Promise<WorkerProcess> {
  const child = spawnModule('src/server/worker', { WORKER_METRICS_PORT: '0', ...env, LOG_LEVEL: 'info' }, [
    'ignore',
    'pipe',
    'pipe',
  ]);
  const lines: string[] = [];
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  onLines(child.stdout!, (line) => lines.push(line));
  child.stderr!.on('data', (d: Buffer) => lines.push(`stderr: ${d.toString()}`));
  const deadline = Date.now() + startTimeoutMs;
  while (!lines.some((l) => l.includes('"worker_started"'))) {
    if (child.signalCode === 'SIGKILL') break; // a crash point can fire before the start line is read
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`worker did not start:\n${lines.join('\n')}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return { child, exited, lines };
}

/** An API process (src/server/api) on a free port; resolves with its URL once it listens. */
export async function spawnApi(
  env: Record<string, string>,
  startTimeoutMs = 90_000,
  nodeArgs: string[] = [],
): Promise<WorkerProcess & { url: string }> {
  const child = spawnModule('src/server/api', { ...env, PORT: '0', LOG_LEVEL: 'info' }, ['ignore', 'pipe', 'pipe'], {
    nodeArgs,
  });
  const lines: string[] = [];
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  onLines(child.stdout!, (line) => lines.push(line));
  child.stderr!.on('data', (d: Buffer) => lines.push(`stderr: ${d.toString()}`));
  const deadline = Date.now() + startTimeoutMs;
  for (;;) {
    const line = lines.find((l) => l.includes('"api_listening"'));
    if (line) return { child, exited, lines, url: (JSON.parse(line) as { url: string }).url };
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`api did not start:\n${lines.join('\n')}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
