/**
 * A real redis-server for the demo and the tests: spawned from PATH on a free
 * port in a temp dir, AOF on, noeviction; stopped (and its dir removed) on stop().
 * When redis-server is absent we try Testcontainers (machines with Docker),
 * else fail with a message saying how to get Redis.
 *
 * The demo's server is `detached` (its own process group: a terminal's Ctrl-C
 * reaches the demo, which stops its workers before Redis, not Redis first) and
 * leaves an owner file in its dir, so a later start can remove the dir (and
 * shut down the server) of an owner that died by SIGKILL (removeStaleRedisDirs).
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { ExitedAtStart, lastLines, startSpawnedServer, untilAnswers, type SpawnedServer } from './spawnedServer.js';

/** kill() sends SIGTERM by default (Redis's own shutdown); restart() replays the AOF. */
export type EmbeddedRedis = SpawnedServer;

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/**
 * Starts a server on a port from freePort; one that exits at start (another process took the port between the
 * probe and the server's bind) starts again on another, up to `attempts` times.
 */
export async function onFreePort<T>(start: (port: number) => Promise<T>, attempts = 3): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start(await freePort());
    } catch (e) {
      if (!(e instanceof ExitedAtStart) || attempt >= attempts) throw e;
    }
  }
}

export function redisServerOnPath(): boolean {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

export interface EmbeddedOptions {
  appendfsync?: 'always' | 'everysec' | 'no';
  extraArgs?: string[];
  port?: number;
  /**
   * Its own process group, so a signal to the caller's group (Ctrl-C) does not stop it before its clients; with an
   * owner file (OWNER_FILE) naming the caller's pid, for removeStaleRedisDirs.
   */
  detached?: boolean;
}

/** The file in a detached server's dir naming who owns it: `{ owner, redis, port }` (pids and port). */
export const OWNER_FILE = 'owner.json';
const DIR_PREFIX = 'agent-redis-';

interface OwnerRecord {
  owner: number;
  redis: number | undefined;
  port: number;
}

/** Whether a process exists (one we may not signal exists too). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as { code?: string }).code === 'EPERM';
  }
}

function readOwner(dir: string): OwnerRecord | undefined {
  try {
    const o = JSON.parse(readFileSync(join(dir, OWNER_FILE), 'utf8')) as Partial<OwnerRecord>;
    return typeof o.owner === 'number' && typeof o.port === 'number' ? (o as OwnerRecord) : undefined;
  } catch {
    return undefined;
  }
}

/** Shuts down the server on `port` if it is the one serving `dir` (a port may have been reused since). */
async function shutdownServerOf(port: number, dir: string): Promise<void> {
  const c = new Redis(port, '127.0.0.1', {
    lazyConnect: true,
    connectTimeout: 500,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  c.on('error', () => {});
  try {
    await c.connect();
    const [, served] = (await c.config('GET', 'dir')) as [string, string];
    if (served === realpathSync(dir)) await c.call('SHUTDOWN', 'NOSAVE').catch(() => {});
  } catch {
    // Nothing answers there, or not a Redis: only the dir is left to remove.
  } finally {
    c.disconnect();
  }
}

/**
 * Removes the temp dirs of detached servers whose owner process is gone (killed with SIGKILL, which no handler
 * sees), shutting down the server still serving one. Dirs without an owner file (the tests') are left alone.
 */
export async function removeStaleRedisDirs(): Promise<{ dir: string; owner: number }[]> {
  const removed: { dir: string; owner: number }[] = [];
  for (const name of readdirSync(tmpdir())) {
    if (!name.startsWith(DIR_PREFIX)) continue;
    const dir = join(tmpdir(), name);
    const owner = readOwner(dir);
    if (!owner || alive(owner.owner)) continue;
    if (owner.redis !== undefined && alive(owner.redis)) await shutdownServerOf(owner.port, dir);
    rmSync(dir, { recursive: true, force: true });
    removed.push({ dir, owner: owner.owner });
  }
  return removed;
}

async function ping(url: string): Promise<void> {
  const c = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  c.on('error', () => {});
  try {
    await c.connect();
    await c.ping();
  } finally {
    c.disconnect();
  }
}

/**
 * The arguments every data node of a multi-node test Redis (cluster, sentinel) starts with: its port on
 * loopback, AOF on in `dir` under per-port names, noeviction, a per-port log.
 */
export function nodeArgs(port: number, dir: string): string[] {
  return [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--save',
    '',
    '--appendonly',
    'yes',
    '--appendfilename',
    `aof-${port}.aof`,
    '--appenddirname',
    `aof-${port}`,
    '--maxmemory-policy',
    'noeviction',
    '--logfile',
    join(dir, `redis-${port}.log`),
  ];
}

/** The arguments of the embedded redis-server: AOF on, noeviction, its log in `dir` (also the bench's replay server). */
export function embeddedServerArgs(port: number, dir: string, opts: EmbeddedOptions = {}): string[] {
  return [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--save',
    '',
    '--appendonly',
    'yes',
    '--appendfsync',
    opts.appendfsync ?? 'everysec',
    '--maxmemory-policy',
    'noeviction',
    '--daemonize',
    'no',
    '--logfile',
    join(dir, 'redis.log'),
    // A run hash (its spec) and a ledger record (its args) hold values of a few hundred bytes: above the
    // default 64 each hash goes to the hashtable encoding, about twice the bytes (README, "Bytes per run").
    '--hash-max-listpack-value',
    '1024',
    ...(opts.extraArgs ?? []),
  ];
}

export async function startEmbeddedRedis(opts: EmbeddedOptions = {}): Promise<EmbeddedRedis> {
  if (!redisServerOnPath()) return startWithTestcontainers();
  if (opts.port !== undefined) return startOn(opts.port, opts);
  return onFreePort((port) => startOn(port, opts));
}

async function startOn(port: number, opts: EmbeddedOptions): Promise<EmbeddedRedis> {
  const dir = mkdtempSync(join(tmpdir(), DIR_PREFIX));
  const args = embeddedServerArgs(port, dir, opts);
  const url = `redis://127.0.0.1:${port}`;
  const started = startSpawnedServer({
    url,
    port,
    dir,
    spawn: () => {
      const child = spawn('redis-server', args, { stdio: 'ignore', detached: opts.detached === true });
      if (opts.detached) {
        const owner: OwnerRecord = { owner: process.pid, redis: child.pid, port };
        writeFileSync(join(dir, OWNER_FILE), JSON.stringify(owner));
      }
      return child;
    },
    ready: () => untilAnswers(`redis-server at ${url}`, 10_000, () => ping(url)),
    killSignal: 'SIGTERM',
    stopSignal: 'SIGKILL',
  });
  // A server that exits at start says why in its log; its dir goes with it (a retry makes its own).
  return started.catch((e: unknown) => {
    if (!(e instanceof ExitedAtStart)) throw e;
    const log = lastLines(join(dir, 'redis.log'));
    rmSync(dir, { recursive: true, force: true });
    throw new ExitedAtStart(`${e.message}: ${log}`);
  });
}

async function startWithTestcontainers(): Promise<EmbeddedRedis> {
  try {
    const { GenericContainer } = await import('testcontainers');
    const container = await new GenericContainer('redis:7')
      .withCommand([
        'redis-server',
        '--appendonly',
        'yes',
        '--maxmemory-policy',
        'noeviction',
        '--hash-max-listpack-value',
        '1024',
      ])
      .withExposedPorts(6379)
      .start();
    const port = container.getMappedPort(6379);
    const url = `redis://${container.getHost()}:${port}`;
    return {
      url,
      port,
      dir: '',
      async kill() {
        await container.stop();
      },
      async restart() {
        await container.restart();
      },
      async stop() {
        await container.stop();
      },
    };
  } catch (e) {
    throw new Error(
      'No Redis available: set REDIS_URL=redis://host:port, or install redis-server ' +
        '(Debian: apt-get install redis-server), or run Docker for Testcontainers. ' +
        `(Testcontainers said: ${e instanceof Error ? e.message : String(e)})`,
      { cause: e },
    );
  }
}
