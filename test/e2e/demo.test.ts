/**
 * `npm start` side by side: two real demo processes (each with its own embedded redis-server,
 * sandbox, API and two worker processes) both serve and settle their runs; ports left unset are
 * chosen free, a port set in the environment that is taken is named in one line. With
 * DEMO_MODEL (npm start -- --model=...) a local model server answers over HTTP through the real providers.
 *
 * Each demo leads its own process group, as from a terminal, and is stopped as Ctrl-C stops it: SIGINT to the
 * whole group (workers included). The stop is bounded whatever dies first (Redis killed, Redis frozen), a second
 * SIGINT forces it, and the Redis temp dir never stays behind (a SIGKILLed demo's is removed by the next start).
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { until } from '../../testkit/until.js';
import { spawnModule } from '../../testkit/spawnModule.js';
import { OWNER_FILE, redisServerOnPath } from '../../testkit/embeddedRedis.js';
import { postgresBinDir } from '../../testkit/embeddedPostgres.js';

interface Demo {
  child: ChildProcess;
  out: () => string;
  exited: Promise<number | null>;
}

const demos: Demo[] = [];

function startDemo(env: Record<string, string | undefined> = {}): Demo {
  // Unset: each demo spawns its own Redis and picks its ports.
  const child = spawnModule(
    'demo/main',
    { REDIS_URL: undefined, REDIS_CLUSTER_NODES: undefined, PORT: undefined, WORKER_METRICS_PORT: undefined, ...env },
    ['ignore', 'pipe', 'pipe'],
    { detached: true },
  );
  let text = '';
  child.stdout!.on('data', (d: Buffer) => (text += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (text += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const demo = { child, out: () => text, exited };
  demos.push(demo);
  return demo;
}

async function waitFor(demo: Demo, pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
  const seen = () => demo.out().match(pattern);
  await until(`${pattern} or the demo's exit`, timeoutMs, () => seen() ?? demo.child.exitCode !== null, 100).catch(
    () => {},
  );
  const m = seen();
  if (m) return m;
  if (demo.child.exitCode !== null) throw new Error(`demo exited ${demo.child.exitCode}:\n${demo.out()}`);
  throw new Error(`no ${pattern} from the demo:\n${demo.out()}`);
}

/**
 * What a terminal's Ctrl-C does: the signal to every process of the demo's group. A group already gone (the demo
 * stopped by itself, as it does when its Redis dies) is left as it is: the caller checks how it ended.
 */
function interrupt(demo: Demo, signal: NodeJS.Signals = 'SIGINT'): void {
  try {
    process.kill(-demo.child.pid!, signal);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

/** The demo's embedded Redis: its temp dir (from the banner) and pid (from the owner file in it). */
async function redisOf(demo: Demo): Promise<{ dir: string; pid: number }> {
  const dir = (await waitFor(demo, /\(embedded, AOF on, in (\S+)\)/, 90_000))[1]!;
  const { redis } = JSON.parse(readFileSync(join(dir, OWNER_FILE), 'utf8')) as { redis: number };
  return { dir, pid: redis };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The exit code, or 'timeout' when the demo is still running after `ms`. */
async function exitWithin(demo: Demo, ms: number): Promise<number | null | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), ms)));
  try {
    return await Promise.race([demo.exited, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** A process's children (pid and command line), from /proc. */
function childrenOf(parent: number): { pid: number; args: string }[] {
  const found: { pid: number; args: string }[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The command name is in parentheses and may hold spaces: the parent pid is the second field after it.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid !== parent) continue;
      found.push({ pid: Number(entry), args: readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ') });
    } catch {
      // Gone between the listing and the read.
    }
  }
  return found;
}

/** Waits until a killed process is reaped (a SIGKILLed Redis goes within milliseconds). */
async function gone(pid: number, ms = 2000): Promise<boolean> {
  return until(`process ${pid} gone`, ms, () => !alive(pid), 25).catch(() => false);
}

const redises: { dir: string; pid: number }[] = [];
afterAll(() => {
  for (const d of demos) {
    if (d.child.exitCode !== null || d.child.signalCode !== null) continue;
    try {
      process.kill(-d.child.pid!, 'SIGKILL');
    } catch {
      // The group is gone already.
    }
  }
  for (const r of redises) {
    if (alive(r.pid)) process.kill(r.pid, 'SIGKILL');
    rmSync(r.dir, { recursive: true, force: true });
  }
});

describe.skipIf(!redisServerOnPath())('npm start', () => {
  it('runs twice side by side: each on its own free ports, both settle their runs with no duplicate', async () => {
    const [a, b] = [startDemo(), startDemo()] as [Demo, Demo];
    const apis: string[] = [];
    for (const d of [a, b]) apis.push((await waitFor(d, /API\s+(http:\/\/\S+)\/v1\/runs/, 90_000))[1] as string);
    expect(apis[0]).not.toBe(apis[1]);
    // The agentctl command the banner prints names its demo's API (not agentctl's default, port 3000).
    for (const [i, d] of [a, b].entries())
      expect(d.out()).toContain(`npm run ctl -- approvals --url ${apis[i]} --token `);
    for (const d of [a, b]) {
      const settled = await waitFor(
        d,
        /all runs settled\. sandbox effects: tickets=(\d+) emails=(\d+) duplicates=(\d+)/,
        120_000,
      );
      expect(settled.slice(1)).toEqual(['3', '3', '0']);
      // With PostgreSQL on the machine, the demo archives its runs (docs/archive.md); else it says it runs without.
      if (postgresBinDir()) await waitFor(d, /archived: 3 runs in PostgreSQL/, 60_000);
      else expect(d.out()).toMatch(/no PostgreSQL server on PATH .*running without the archive/);
    }
    for (const api of apis) expect((await fetch(`${api}/healthz`)).status).toBe(200);
    const stores = await Promise.all([a, b].map(redisOf));
    for (const d of [a, b]) interrupt(d);
    for (const d of [a, b]) expect(await exitWithin(d, 5000), d.out()).toBe(0);
    for (const r of stores) {
      expect(existsSync(r.dir)).toBe(false);
      expect(await gone(r.pid)).toBe(true);
    }
  }, 240_000);

  it('--model=openai-local / anthropic-local (DEMO_MODEL): the same runs through the real AI SDK providers over HTTP to a local model server', async () => {
    const [o, a] = [startDemo({ DEMO_MODEL: 'openai-local' }), startDemo({ DEMO_MODEL: 'anthropic-local' })] as [
      Demo,
      Demo,
    ];
    await waitFor(o, /model\s+openai-compatible demo-local-llama at http:\/\/127\.0\.0\.1:\d+/, 90_000);
    await waitFor(a, /model\s+anthropic demo-local-claude at http:\/\/127\.0\.0\.1:\d+/, 90_000);
    for (const [d, model] of [
      [o, 'demo-local-llama'],
      [a, 'demo-local-claude'],
    ] as const) {
      const settled = await waitFor(
        d,
        /all runs settled\. sandbox effects: tickets=(\d+) emails=(\d+) duplicates=(\d+)\. model server: (\d+) requests, models (\S+)\./,
        120_000,
      );
      // Three tickets of five decisions each (the support agent reads the customer and the knowledge base in one turn),
      // every one asked of the local server by its model id; no decision asked twice.
      expect(settled.slice(1), d.out()).toEqual(['3', '3', '0', '15', model]);
      expect(d.out()).not.toMatch(/\b(failed|needs_human|budget_exceeded)\b/);
    }
    for (const d of [o, a]) interrupt(d);
    for (const d of [o, a]) expect(await exitWithin(d, 5000), d.out()).toBe(0);
  }, 240_000);

  it('names a --model it does not know in one line and exits non-zero', async () => {
    const d = startDemo({ DEMO_MODEL: 'gpt-5-local' });
    expect(await d.exited).not.toBe(0);
    expect(d.out().trim().split('\n')).toEqual([
      expect.stringMatching(
        /^demo: cannot start: --model \(DEMO_MODEL\) must be one of scripted, openai-local, anthropic-local, not 'gpt-5-local'/,
      ),
    ]);
  }, 90_000);

  it('names a port set in the environment that is taken, in one line, and exits non-zero', async () => {
    const taken: Server = createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    const port = (taken.address() as AddressInfo).port;
    try {
      const d = startDemo({ PORT: String(port) });
      expect(await d.exited).not.toBe(0);
      expect(d.out().trim().split('\n')).toEqual([
        expect.stringMatching(new RegExp(`^demo: cannot start: port ${port} \\(PORT\\) is already in use`)),
      ]);
    } finally {
      await new Promise((r) => taken.close(r));
    }
  }, 90_000);

  it('Redis killed first, then Ctrl-C: the stop is bounded and removes the temp dir', async () => {
    const d = startDemo();
    const r = await redisOf(d);
    redises.push(r);
    await waitFor(d, /enqueued DEMO-3/, 90_000);
    process.kill(r.pid, 'SIGKILL');
    await until('the redis-server gone', 5000, () => !alive(r.pid));
    const at = Date.now();
    interrupt(d);
    const code = await exitWithin(d, 7000);
    expect(code, d.out()).not.toBe('timeout');
    console.log(`Redis killed first: the demo exited ${Date.now() - at} ms after SIGINT (code ${code})`);
    expect(existsSync(r.dir)).toBe(false);
    expect(d.out()).toMatch(/the embedded redis-server exited \(SIGKILL\): stopping/);
  }, 120_000);

  it('a frozen Redis: one Ctrl-C stops within the deadline; a second Ctrl-C forces the exit at once', async () => {
    const [slow, forced] = [startDemo(), startDemo()] as [Demo, Demo];
    const stores = [await redisOf(slow), await redisOf(forced)];
    redises.push(...stores);
    for (const d of [slow, forced]) await waitFor(d, /all runs settled/, 120_000);
    // SIGSTOP: the server neither answers nor closes its connections, so whatever waits on it waits for ever.
    for (const r of stores) process.kill(r.pid, 'SIGSTOP');
    const started = Date.now();
    for (const d of [slow, forced]) interrupt(d);
    expect(await exitWithin(forced, 1500), forced.out()).toBe('timeout');
    interrupt(forced);
    expect(await exitWithin(forced, 1500), forced.out()).toBe(1);
    expect(forced.out()).toMatch(/second SIGINT: killing what is left/);
    expect(await exitWithin(slow, 7000 - (Date.now() - started)), slow.out()).toBe(1);
    expect(slow.out()).toMatch(/the stop took longer than 5000 ms: killing what is left/);
    for (const r of stores) {
      expect(existsSync(r.dir)).toBe(false);
      expect(await gone(r.pid)).toBe(true);
    }
  }, 120_000);

  it('a group signal that kills the workers before the demo hears it is still a clean stop (exit 0)', async () => {
    // A worker still loading its modules dies of the group's SIGINT; its death can be reported before the demo's own
    // SIGINT is handled (the signals land on different threads). Planted with SIGHUP (a terminal's hang-up, sent to
    // the group like Ctrl-C; the worker never handles it): the workers first, the demo a moment later.
    const d = startDemo();
    redises.push(await redisOf(d));
    const workerPids = await until('both worker processes', 30_000, () => {
      const pids = childrenOf(d.child.pid!)
        .filter((c) => /server\/worker/.test(c.args))
        .map((c) => c.pid);
      return pids.length === 2 ? pids : undefined;
    });
    for (const pid of workerPids) process.kill(pid, 'SIGHUP');
    await until('the workers gone', 5000, () => workerPids.every((pid) => !alive(pid)), 10);
    interrupt(d, 'SIGHUP');
    expect(await exitWithin(d, 7000), d.out()).toBe(0);
    expect(d.out()).not.toMatch(/a worker process exited/);
  }, 120_000);

  it('a worker killed on its own (SIGKILL) stops the demo at once, exit 1, naming the signal', async () => {
    const d = startDemo();
    redises.push(await redisOf(d));
    const [worker] = await until('a worker process', 30_000, () => {
      const pids = childrenOf(d.child.pid!).filter((c) => /server\/worker/.test(c.args));
      return pids.length > 0 ? pids : undefined;
    });
    process.kill(worker!.pid, 'SIGKILL');
    expect(await exitWithin(d, 7000), d.out()).toBe(1);
    expect(d.out()).toMatch(/a worker process exited \(SIGKILL\): stopping/);
  }, 120_000);

  it('a SIGKILLed demo leaves neither its Redis nor its temp dir (its reaper), and the next one goes on Ctrl-C', async () => {
    const killed = startDemo();
    const old = await redisOf(killed);
    redises.push(old);
    const oldPg = postgresBinDir()
      ? (await waitFor(killed, /\(embedded PostgreSQL in (\S+)\)/, 90_000))[1]!
      : undefined;
    // Redis has its own process group: the SIGKILL of the demo's group does not reach it, the demo's reaper does.
    process.kill(-killed.child.pid!, 'SIGKILL');
    await killed.exited;
    expect(await gone(old.pid, 10_000)).toBe(true);
    await until("the killed demo's Redis dir removed", 10_000, () => !existsSync(old.dir));
    // Its archive's PostgreSQL dir too (the server went with the demo's process group).
    if (oldPg) await until("the killed demo's PostgreSQL dir removed", 10_000, () => !existsSync(oldPg));
    const next = startDemo();
    const fresh = await redisOf(next);
    redises.push(fresh);
    const at = Date.now();
    interrupt(next);
    expect(await exitWithin(next, 5000), next.out()).toBe(0);
    console.log(`Ctrl-C: the demo exited ${Date.now() - at} ms after SIGINT`);
    expect(existsSync(fresh.dir)).toBe(false);
  }, 120_000);
});
