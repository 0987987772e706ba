/**
 * A process that cannot start says why in one line on stderr and exits non-zero, within a bounded
 * time: bad configuration, no REDIS_URL, an unreachable Redis, a port in use. Real processes
 * (the entry points from sources), real sockets.
 */
import type { ChildProcess } from 'node:child_process';
import { createServer, type Server, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// Each case starts several processes from sources (tsx) on a shared 2-core machine.
const BOOT_CASE_TIMEOUT_MS = 180_000;
import { spawnModule } from '../../testkit/spawnModule.js';
import { Redis } from 'ioredis';
import { freePort, startEmbeddedRedis } from '../../testkit/embeddedRedis.js';
import { redisUrl, uniquePrefix } from '../../testkit/harness.js';
import { spawnApi, spawnReconciler, spawnWorker } from '../../testkit/processes.js';
import { until } from '../../testkit/until.js';

interface Exit {
  code: number | null;
  stdout: string;
  stderr: string;
}

const children = new Set<ChildProcess>();

/** Runs an entry point to its exit (the test's timeout bounds it: an endless retry loop fails). */
function runToExit(module: string, env: Record<string, string>): Promise<Exit> {
  const prefix = uniquePrefix('boot');
  const child = spawnModule(
    module,
    {
      // Whatever the runner's environment holds, these are the test's.
      APP_MODE: 'development',
      REDIS_URL: '',
      REDIS_CLUSTER_NODES: '',
      KEY_PREFIX: prefix,
      BULL_PREFIX: `${prefix}b`,
      LOG_LEVEL: 'info',
      WORKER_METRICS_PORT: '0',
      RECONCILER_METRICS_PORT: '0',
      PORT: '0',
      SANDBOX_PORT: '0',
      ...env,
    },
    ['ignore', 'pipe', 'pipe'],
  );
  children.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
}

function expectOneLine(exit: Exit, pattern: RegExp): void {
  expect(exit.code, `${exit.stdout}${exit.stderr}`).not.toBe(0);
  expect(exit.code).not.toBeNull();
  const lines = exit.stderr.trimEnd().split('\n');
  expect(lines, exit.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(pattern);
  expect(lines[0]).not.toMatch(/\bat .*\(.*:\d+:\d+\)/); // no stack frame
  expect(exit.stdout, 'nothing else printed').toBe('');
}

let taken: Server;
let takenPort = 0;
beforeAll(async () => {
  taken = createServer();
  await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
  takenPort = (taken.address() as AddressInfo).port;
});
afterAll(async () => {
  // On the code before the fix these never exit: do not leave them behind.
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await new Promise((r) => taken.close(r));
});

describe('a process that cannot boot', () => {
  it(
    'names the bad setting (api)',
    async () => {
      expectOneLine(
        await runToExit('src/server/api', { REDIS_URL: redisUrl(), LOCK_DURATION_MS: 'soon' }),
        /^api: cannot start: invalid configuration: LOCK_DURATION_MS\b/,
      );
    },
    BOOT_CASE_TIMEOUT_MS,
  );

  it(
    'names a production refusal (worker)',
    async () => {
      expectOneLine(
        await runToExit('src/server/worker', {
          APP_MODE: 'production',
          REDIS_URL: redisUrl(),
          MODEL_PROVIDER: 'openai',
          PRODUCER_TOKEN: 'producer-token-for-production',
          OPERATOR_TOKEN: 'operator-token-for-production',
          SANDBOX_URL: 'http://127.0.0.1:9',
          ZENDESK_EMAIL: 'agent@example.com',
          ZENDESK_TOKEN: 'z',
          RESEND_API_KEY: 're_x',
          RESEND_FROM: 'Support <support@example.com>',
          STRIPE_API_KEY: 'sk_test_x',
        }),
        /^worker: cannot start: invalid configuration: OPENAI_API_KEY\b/,
      );
    },
    BOOT_CASE_TIMEOUT_MS,
  );

  it(
    'refuses a short credential in production, naming the setting and not the value (api)',
    async () => {
      const exit = await runToExit('src/server/api', {
        APP_MODE: 'production',
        REDIS_URL: redisUrl(),
        MODEL_PROVIDER: 'openai',
        OPENAI_API_KEY: 'sk-test-not-used',
        PRODUCER_TOKEN: 'producer-token-for-production',
        OPERATOR_TOKEN: 'operator-token-for-production',
        BULL_BOARD_USER: 'admin',
        BULL_BOARD_PASSWORD: 'pw-shorty',
        SANDBOX_URL: 'http://127.0.0.1:9',
        ZENDESK_EMAIL: 'agent@example.com',
        ZENDESK_TOKEN: 'z',
        RESEND_API_KEY: 're_x',
        RESEND_FROM: 'Support <support@example.com>',
        STRIPE_API_KEY: 'sk_test_x',
      });
      expectOneLine(
        exit,
        /^api: cannot start: invalid configuration: BULL_BOARD_PASSWORD: must be at least 16 characters/,
      );
      expect(exit.stderr).not.toContain('pw-shorty');
    },
    BOOT_CASE_TIMEOUT_MS,
  );

  it(
    'names a missing REDIS_URL (reconciler)',
    async () => {
      expectOneLine(await runToExit('src/server/reconciler', {}), /^reconciler: cannot start: .*REDIS_URL/);
    },
    BOOT_CASE_TIMEOUT_MS,
  );

  it(
    'names an unreachable Redis and stops instead of retrying forever (api, worker, reconciler)',
    async () => {
      const nobody = `redis://127.0.0.1:${await freePort()}`;
      const env = { REDIS_URL: nobody, REDIS_BOOT_TIMEOUT_MS: '300' };
      const exits = await Promise.all([
        runToExit('src/server/api', env),
        runToExit('src/server/worker', env),
        runToExit('src/server/reconciler', env),
      ]);
      for (const exit of exits)
        expectOneLine(exit, new RegExp(`cannot start: Redis at ${nobody} unreachable for 300 ms .*ECONNREFUSED`));
    },
    BOOT_CASE_TIMEOUT_MS,
  );

  it(
    'names the port in use (api PORT, worker WORKER_METRICS_PORT, reconciler RECONCILER_METRICS_PORT, sandbox SANDBOX_PORT)',
    async () => {
      const port = String(takenPort);
      const env = { REDIS_URL: redisUrl() };
      const [api, worker, reconciler, sandbox] = await Promise.all([
        runToExit('src/server/api', { ...env, PORT: port }),
        runToExit('src/server/worker', { ...env, WORKER_METRICS_PORT: port }),
        runToExit('src/server/reconciler', { ...env, RECONCILER_METRICS_PORT: port }),
        runToExit('sandbox/main', { SANDBOX_PORT: port }),
      ]);
      expectOneLine(api, new RegExp(`^api: cannot start: port ${port} \\(PORT\\) is already in use`));
      expectOneLine(
        worker,
        new RegExp(`^worker: cannot start: port ${port} \\(WORKER_METRICS_PORT\\) is already in use`),
      );
      expectOneLine(
        reconciler,
        new RegExp(`^reconciler: cannot start: port ${port} \\(RECONCILER_METRICS_PORT\\) is already in use`),
      );
      expectOneLine(sandbox, new RegExp(`^sandbox: cannot start: port ${port} \\(SANDBOX_PORT\\) is already in use`));
    },
    BOOT_CASE_TIMEOUT_MS,
  );

  const BOOT_DEADLINE_MS = 1000;
  it(
    'once booted, outlives a Redis restart and reconnects (the boot deadline is for boot only)',
    async () => {
      const redis = await startEmbeddedRedis();
      const admin = new Redis(redis.url, { maxRetriesPerRequest: null });
      admin.on('error', () => {});
      const prefix = uniquePrefix('reboot');
      const worker = await spawnWorker({
        REDIS_URL: redis.url,
        REDIS_CLUSTER_NODES: '',
        KEY_PREFIX: prefix,
        BULL_PREFIX: `${prefix}b`,
        // Long enough for a process on a loaded machine to see a live Redis answer (300 ms was not: the
        // boot deadline's timer fired before the socket's reply was read), short against the outage below.
        REDIS_BOOT_TIMEOUT_MS: String(BOOT_DEADLINE_MS),
      });
      children.add(worker.child);
      const workerConnected = () =>
        until(
          'a worker connection',
          30_000,
          async () => / name=worker /.test((await admin.client('LIST')) as string),
          50,
        );
      try {
        await workerConnected();
        // Every connection drops, and Redis stays away longer than the boot deadline: were the deadline applied
        // after boot too, the worker would exit. Any worker connection on the new server is a reconnect.
        await redis.kill();
        // The outage under test: longer than the boot deadline.
        await new Promise((r) => setTimeout(r, BOOT_DEADLINE_MS + 500));
        await redis.restart();
        await workerConnected();
        expect(worker.child.exitCode, worker.lines.join('\n')).toBeNull();
        worker.child.kill('SIGTERM');
        expect((await worker.exited).code).toBe(0);
      } finally {
        if (worker.child.exitCode === null) worker.child.kill('SIGKILL');
        admin.disconnect();
        await redis.stop();
      }
    },
    BOOT_CASE_TIMEOUT_MS,
  );

  it(
    'a SIGTERM while Redis is away: the worker stops cleanly (exit 0) instead of waiting out its grace period',
    async () => {
      const redis = await startEmbeddedRedis();
      const prefix = uniquePrefix('away');
      const worker = await spawnWorker({
        REDIS_URL: redis.url,
        REDIS_CLUSTER_NODES: '',
        KEY_PREFIX: prefix,
        BULL_PREFIX: `${prefix}b`,
      });
      children.add(worker.child);
      try {
        // Every connection is reconnecting when the signal comes: the schedule worker's close() never resolved,
        // and the process left after SHUTDOWN_GRACE_MS + 3 s with forced_exit and code 1, holding nothing.
        await redis.kill();
        worker.child.kill('SIGTERM');
        const exit = await worker.exited;
        const said = worker.lines.join('\n');
        expect(exit.code, said).toBe(0);
        expect(said).not.toContain('"forced_exit"');
        expect(said).toContain('"shutdown_done"');
        // A close that hangs on its reconnecting connection is cut short after its bound, and says which it was.
        // Which ones hang depends on how far each connection got before the signal: the step workers' close may
        // still finish in time, the schedule worker's too.
        const cut = worker.lines.filter((l) => l.includes('"code":"close_timeout"'));
        for (const line of cut)
          expect(line).toMatch(/"worker":"(steps","timeoutMs":1500|schedules","timeoutMs":3000|connections")/);
      } finally {
        if (worker.child.exitCode === null) worker.child.kill('SIGKILL');
        await redis.stop();
      }
    },
    BOOT_CASE_TIMEOUT_MS,
  );

  it(
    'a SIGTERM while Redis is away: the reconciler and the API leave within their grace, saying how',
    async () => {
      const redis = await startEmbeddedRedis();
      const prefix = uniquePrefix('awayrec');
      const env = {
        REDIS_URL: redis.url,
        REDIS_CLUSTER_NODES: '',
        KEY_PREFIX: prefix,
        BULL_PREFIX: `${prefix}b`,
        SHUTDOWN_GRACE_MS: '1500',
        // A compaction pass every 20 ms: one is waiting on Redis when the signal comes.
        COMPACT_INTERVAL_MS: '20',
      };
      const procs = [await spawnReconciler(env), await spawnApi(env)];
      for (const p of procs) children.add(p.child);
      try {
        await redis.kill();
        await new Promise((r) => setTimeout(r, 300));
        for (const p of procs) p.child.kill('SIGTERM');
        for (const p of procs) {
          // Before: a pass (or a close) waiting on the reconnecting connection kept the process for as long as Redis
          // stayed away. Now the stop is cut at the grace, the close at its own bound: 3.5 s, and a margin.
          const exit = await Promise.race([
            p.exited,
            new Promise<undefined>((r) => setTimeout(() => r(undefined), 10_000).unref()),
          ]);
          const said = p.lines.join('\n');
          expect(exit, said).toBeDefined();
          expect(said).toContain('"shutdown_started"');
          // Stopped in time and closed (exit 0), or cut at the grace with the stage it was in (exit 1).
          if (exit!.code === 0) expect(said).toContain('"shutdown_done"');
          else expect(said).toMatch(/"code":"forced_exit".*"stage":"stopping"/);
        }
      } finally {
        for (const p of procs) if (p.child.exitCode === null) p.child.kill('SIGKILL');
        await redis.stop();
      }
    },
    BOOT_CASE_TIMEOUT_MS,
  );

  it(
    'names a bad sandbox setting',
    async () => {
      expectOneLine(
        await runToExit('sandbox/main', { SANDBOX_PORT: 'http' }),
        /^sandbox: cannot start: invalid configuration: SANDBOX_PORT\b/,
      );
    },
    BOOT_CASE_TIMEOUT_MS,
  );
});
