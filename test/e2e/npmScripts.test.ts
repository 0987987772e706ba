/**
 * The package.json scripts as a user runs them: `npm run worker` runs Node directly (no tsx process in between), so a
 * SIGTERM sent to npm reaches the worker and the documented handoff happens (the held step handed back,
 * `shutdown_done` logged, another worker finishes the run); and `npm start` killed by SIGKILL leaves no process behind
 * (its workers, its Redis).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { createHarness, sampleTicket } from '../../testkit/harness.js';
import { buildSpec } from '../../src/producer/intake.js';
import { freePort, redisServerOnPath } from '../../testkit/embeddedRedis.js';
import { onLines } from '../../testkit/spawnModule.js';
import { until } from '../../testkit/until.js';

const started: ChildProcess[] = [];
afterAll(() => {
  for (const c of started) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

function npm(script: string, env: Record<string, string | undefined>): { child: ChildProcess; lines: string[] } {
  const child = spawn('npm', ['run', '--silent', script], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.push(child);
  const lines: string[] = [];
  onLines(child.stdout, (l) => lines.push(l));
  onLines(child.stderr, (l) => lines.push(`stderr: ${l}`));
  return { child, lines };
}

/** Every process whose ancestry leads to `root` (ps's pid/ppid table), root excluded. */
function descendants(root: number): number[] {
  const table = execFileSync('ps', ['-eo', 'pid=,ppid='], { encoding: 'utf8' })
    .trim()
    .split('\n')
    .map((l) => l.trim().split(/\s+/).map(Number) as [number, number]);
  const found: number[] = [];
  const walk = (pid: number) => {
    for (const [child, parent] of table)
      if (parent === pid) {
        found.push(child);
        walk(child);
      }
  };
  walk(root);
  return found;
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('npm scripts', () => {
  it('SIGTERM to `npm run worker` reaches the worker: the held step is handed over, shutdown_done logged', async () => {
    const h = await createHarness('npmworker');
    try {
      h.sandbox.setFaults([{ kind: 'slow_commit', resource: 'kb', ms: 3000 }]);
      const spec = buildSpec(
        h.ctx,
        { tenant: 'acme', ticket: sampleTicket('NPM-1'), budget: { maxSteps: 25 } },
        Date.now(),
      );
      await h.ctx.store.create(spec, Date.now());
      const worker = npm('worker', {
        ...h.env,
        WORKER_METRICS_PORT: String(await freePort()),
        LOG_LEVEL: 'info',
        SHUTDOWN_GRACE_MS: '10000',
      });
      await until('the worker started', 60_000, () => worker.lines.some((l) => l.includes('"worker_started"')));
      expect(worker.lines.find((l) => l.includes('"worker_started"'))).toContain('support@');
      // Step 2 reads the knowledge base, which hangs 3 s: the worker holds the step once the read has arrived (the
      // job active in Redis is not enough: the worker may not have BullMQ's answer yet).
      await until('step 2 held', 20_000, () => h.sandbox.held() > 0);
      worker.child.kill('SIGTERM');
      await until('npm exited', 20_000, () => worker.child.exitCode !== null || worker.child.signalCode !== null);
      expect(worker.lines.some((l) => l.includes('"sigterm_handoff"'))).toBe(true);
      expect(worker.lines.some((l) => l.includes('"shutdown_done"'))).toBe(true);
      h.sandbox.clearFaults();
      await h.startWorker();
      expect(await h.waitForStatus(spec.runId, ['completed', 'failed', 'needs_human'], 30_000)).toBe('completed');
      expect(h.sandbox.counts().duplicates).toBe(0);
    } finally {
      await h.close();
    }
  }, 120_000);

  it.skipIf(!redisServerOnPath())(
    'SIGKILL of `npm start` leaves no process',
    async () => {
      const demo = npm('start', {
        REDIS_URL: undefined,
        REDIS_CLUSTER_NODES: undefined,
        PORT: undefined,
        WORKER_METRICS_PORT: undefined,
        DEMO_TICKETS: '0',
      });
      await until('the demo is up', 90_000, () => demo.lines.some((l) => l.includes('Ctrl-C stops everything')), 100);
      // Both workers up (their processes exist once spawned; wait until they are in the tree).
      const tree = await until('the demo tree', 30_000, () => {
        const pids = descendants(demo.child.pid!);
        return pids.length >= 4 ? pids : undefined; // shell or node, the demo's node, redis, two workers
      });
      demo.child.kill('SIGKILL');
      await until('every process of the demo gone', 30_000, () => tree.every((pid) => !alive(pid)), 100);
    },
    180_000,
  );
});
