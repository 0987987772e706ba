/** Real worker processes for the chaos campaign (like testkit/processes.ts, without importing tests). */
import type { ChildProcess } from 'node:child_process';
import { onLines, spawnModule } from '../../../testkit/spawnModule.js';

export interface ChaosWorker {
  child: ChildProcess;
  pid: number;
  crashPoint?: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
  lines: string[];
  /** BullMQ worker ids of this process: the prefix of its jobs' lock tokens. */
  bullIds: string[];
  /** Set when the campaign itself sent the signal. */
  sent?: 'SIGKILL' | 'SIGTERM';
  sentAt?: number;
  /** The campaign's final stop (not a chaos SIGTERM). */
  final?: boolean;
  dead: boolean;
}

export async function spawnChaosWorker(
  env: Record<string, string>,
  crashPoint?: string,
  startTimeoutMs = 30_000,
): Promise<ChaosWorker> {
  const child = spawnModule(
    'src/server/worker',
    { WORKER_METRICS_PORT: '0', LOG_LEVEL: 'info', ...env, ...(crashPoint ? { CRASH_POINTS: crashPoint } : {}) },
    ['ignore', 'pipe', 'pipe'],
  );
  const lines: string[] = [];
  const w: ChaosWorker = {
    child,
    pid: child.pid ?? -1,
    lines,
    bullIds: [],
    dead: false,
    ...(crashPoint ? { crashPoint } : {}),
    exited: undefined as never,
  };
  w.exited = new Promise((resolve) =>
    child.once('exit', (code, signal) => {
      w.dead = true;
      resolve({ code, signal, at: Date.now() });
    }),
  );
  onLines(child.stdout!, (line) => {
    // Keep only what we need (startup and shutdown), not every step line.
    if (line.includes('"worker_started"')) {
      try {
        w.bullIds = (JSON.parse(line) as { bullWorkerIds?: string[] }).bullWorkerIds ?? [];
      } catch {
        /* not JSON */
      }
    }
    if (/worker_started|shutdown|forced_exit|error/.test(line)) {
      lines.push(line);
      if (lines.length > 200) lines.splice(1, 1); // keep the start line and the latest
    }
  });
  child.stderr!.on('data', (d: Buffer) => {
    if (lines.length < 200) lines.push(`stderr: ${d.toString()}`);
  });
  const deadline = Date.now() + startTimeoutMs;
  while (!lines.some((l) => l.includes('"worker_started"'))) {
    if (w.dead) return w; // a crash-point worker may die before we see its start line
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`worker did not start:\n${lines.join('\n')}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return w;
}
