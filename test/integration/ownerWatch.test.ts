/**
 * The owner watch against real Redis and real BullMQ workers: lock tokens name
 * the connection that holds the job (a guard on BullMQ's token layout), a job
 * held by a live connection is never moved, and the jobs of a connection that
 * vanished go back to wait at once, counted as a stall, with BullMQ's events.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Queue, Worker, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { createHarness, redisUrl, type Harness } from '../../testkit/harness.js';
import { nameWorkerOwner, ownerBaseOfToken, ownerOfToken } from '../../src/store/bullmqInternals.js';
import { OwnerWatch, WATCH_SPREAD, watchSpread } from '../../src/worker/ownerWatch.js';
import { clientIdsOfList, ownerOfConnection, parseOwner } from '../../src/store/owners.js';
import { requeueDeadOwner } from '../../src/store/calls/requeueDeadOwner.js';
import { until } from '../../testkit/until.js';
import { captureCommands, type TracedCommand } from '../../bench/lib/monitorTrace.js';

let h: Harness;
const closers: (() => Promise<unknown>)[] = [];
beforeEach(async () => {
  h = await createHarness('ownerwatch');
});
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c().catch(() => {});
  await h.close();
});

/** A BullMQ worker on its own connection, named like a FleetWorker's, that holds every job it takes until released. */
async function holdingWorker(): Promise<{
  conn: Redis;
  worker: Worker;
  clientId: number;
  owner: string;
  held: Map<string, string>;
  release: () => void;
}> {
  const conn = new Redis(redisUrl(), { maxRetriesPerRequest: null });
  const held = new Map<string, string>();
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  const worker = new Worker(
    h.ctx.keys.queueName(0),
    async (job: Job, token?: string) => {
      held.set(job.id!, token!);
      await released;
    },
    {
      connection: conn,
      prefix: h.ctx.keys.bullPrefix,
      concurrency: 5,
      lockDuration: 60_000,
      stalledInterval: 60_000,
      autorun: false,
    },
  );
  worker.on('error', () => {});
  const owner = await ownerOfConnection(conn);
  const clientId = Number(parseOwner(owner)!.clientId);
  nameWorkerOwner(worker, 'probe', owner);
  void worker.run();
  closers.push(async () => {
    release();
    await worker.close(true);
    conn.disconnect();
  });
  return { conn, worker, clientId, owner, held, release };
}

/** Waits until the server no longer lists the connection `clientId` (its process died: the kernel closed it). */
async function closed(clientId: number, what: string): Promise<void> {
  await until(
    what,
    10_000,
    async () =>
      !clientIdsOfList(String(await h.ctx.redis.client('LIST', 'ID', String(clientId)))).has(String(clientId)),
  );
}

/** The commands the server ran while `passes` ran (MONITOR; scripts' own calls with `scriptCalls`). */
async function commandsDuring(passes: () => Promise<unknown>, scriptCalls = false): Promise<TracedCommand[]> {
  const url = new URL(redisUrl());
  const monitor = await captureCommands(Number(url.port), url.hostname, { scriptCalls });
  let seen: TracedCommand[] = [];
  try {
    await passes();
  } finally {
    seen = await monitor.stop();
  }
  return seen;
}

/**
 * One process's watcher on a connection of its own, passes a minute apart (each tick is one pass), and a way to have
 * the server drop that connection (a network blip, a proxy's restart): ioredis connects again.
 */
async function loneWatcher(): Promise<{
  conn: Redis;
  worker: { id: string };
  watch: OwnerWatch;
  drop: () => Promise<void>;
}> {
  const conn = new Redis(redisUrl(), { maxRetriesPerRequest: null });
  closers.push(async () => conn.disconnect());
  const worker = { id: 'w' };
  const watch = new OwnerWatch({ ...h.ctx, redis: conn }, [{ shard: 0, worker }], {
    intervalMs: 60_000,
    maxStalledCount: 5,
  });
  closers.push(() => watch.stop());
  await watch.name();
  const drop = async () => {
    await h.ctx.redis.client('KILL', 'ID', parseOwner(ownerOfToken(`${worker.id}:0`)!)!.clientId);
  };
  return { conn, worker, watch, drop };
}

describe('owner watch', () => {
  it("a fetched job's lock token names the worker's connection (BullMQ token layout: `${worker.id}:<n>`)", async () => {
    const queue = new Queue(h.ctx.keys.queueName(0), { connection: h.ctx.redis, prefix: h.ctx.keys.bullPrefix });
    closers.push(() => queue.close());
    const w = await holdingWorker();
    await queue.add('step', {}, { jobId: 'own-1' });
    const token = await until('the job to start', 10_000, async () => w.held.get('own-1'));
    expect(token.startsWith(`probe@${w.clientId}-`)).toBe(true);
    expect(ownerOfToken(token)).toBe(w.owner);
    expect(ownerBaseOfToken(token)).toBe('probe');
    expect(await h.ctx.redis.get(h.ctx.keys.jobLock(0, 'own-1'))).toBe(token);
    expect(clientIdsOfList(String(await h.ctx.redis.client('LIST', 'ID', String(w.clientId), '999999999')))).toEqual(
      new Set([String(w.clientId)]),
    );
  });

  it('a live owner is never robbed; once its connection is gone its jobs go back to wait at once, a stall counted, with BullMQ events', async () => {
    const queue = new Queue(h.ctx.keys.queueName(0), { connection: h.ctx.redis, prefix: h.ctx.keys.bullPrefix });
    closers.push(() => queue.close());
    const w = await holdingWorker();
    await queue.addBulk([
      { name: 'step', data: {}, opts: { jobId: 'own-a' } },
      { name: 'step', data: {}, opts: { jobId: 'own-b' } },
    ]);
    await until('both jobs to start', 10_000, async () => w.held.size === 2);

    // A watcher on this test's connection (as a FleetWorker's own would run): the owner is alive, nothing moves.
    const watch = new OwnerWatch(h.ctx, [{ shard: 0, worker: { id: 'watcher' } }], {
      intervalMs: 0,
      maxStalledCount: 1,
    });
    await watch.tick();
    expect(await queue.getActiveCount()).toBe(2);
    // The script moves only jobs whose lock names the given owner: another id, or the same id on another server,
    // moves nothing.
    expect(
      await requeueDeadOwner(
        h.ctx.redis as Redis,
        h.ctx.keys,
        0,
        `${w.clientId + 100_000}-${parseOwner(w.owner)!.server}`,
        1,
      ),
    ).toEqual([]);
    expect(await requeueDeadOwner(h.ctx.redis as Redis, h.ctx.keys, 0, `${w.clientId}-000000000000`, 1)).toEqual([]);
    expect(await queue.getActiveCount()).toBe(2);

    // The owner's connection vanishes (its process died): the next tick moves both jobs.
    w.conn.disconnect();
    await closed(w.clientId, 'the connection to close');
    const requeues = async () => (await h.ctx.metrics.deadOwnerRequeues.get()).values[0]?.value ?? 0;
    const before = await requeues();
    await watch.tick();
    expect(await queue.getActiveCount()).toBe(0);
    expect((await queue.getWaiting()).map((j) => j.id).sort()).toEqual(['own-a', 'own-b']);
    expect(await h.ctx.redis.exists(h.ctx.keys.jobLock(0, 'own-a'))).toBe(0);
    expect(await h.ctx.redis.hget(h.ctx.keys.jobHash(0, 'own-a'), 'stc')).toBe('1');
    expect((await requeues()) - before).toBe(2);
    const events = (await h.ctx.redis.xrange(`${h.ctx.keys.queueKeyPrefix(0)}events`, '-', '+')).map(
      ([, f]) => `${f[1]}:${f[3]}`,
    );
    expect(events).toContain('stalled:own-a');
    expect(events).toContain('waiting:own-b');

    // A job that keeps losing its owner past MAX_STALLED_COUNT is marked to fail on its next fetch (BullMQ's reason).
    const w2 = await holdingWorker();
    await until('the jobs to start again', 10_000, async () => w2.held.size === 2);
    w2.conn.disconnect();
    await closed(w2.clientId, 'the second connection to close');
    await watch.tick();
    expect(await h.ctx.redis.hget(h.ctx.keys.jobHash(0, 'own-a'), 'defa')).toBe(
      'job stalled more than allowable limit',
    );
  });

  it('between two passes, the probe notices an owner the last pass found alive is gone and starts a pass at once', async () => {
    const queue = new Queue(h.ctx.keys.queueName(0), { connection: h.ctx.redis, prefix: h.ctx.keys.bullPrefix });
    closers.push(() => queue.close());
    const w = await holdingWorker();
    await queue.add('step', {}, { jobId: 'probe-a' });
    await until('the job to start', 10_000, async () => w.held.size === 1);
    // Passes a minute apart: only the probe can move the job within this test.
    const watch = new OwnerWatch(h.ctx, [{ shard: 0, worker: { id: 'watcher' } }], {
      intervalMs: 60_000,
      probeMs: 20,
      maxStalledCount: 5,
    });
    closers.push(() => watch.stop());
    await watch.tick(); // the pass that finds the owner alive
    let probes = 0;
    const probe = watch.probe.bind(watch);
    watch.probe = async () => {
      await probe();
      probes++;
    };
    watch.start();
    await until('five probes', 10_000, () => probes >= 5);
    expect(await queue.getActiveCount()).toBe(1); // a live owner's job stays through many probes

    w.conn.disconnect();
    await until('the probe to requeue the job', 10_000, async () =>
      (await queue.getWaiting()).some((j) => j.id === 'probe-a'),
    );
    expect(await queue.getActiveCount()).toBe(0);
  });

  it('the watchers of a queue share one scan of its locks a period; a requeue lets the scan go so the next pass scans again', async () => {
    const queue = new Queue(h.ctx.keys.queueName(0), { connection: h.ctx.redis, prefix: h.ctx.keys.bullPrefix });
    closers.push(() => queue.close());
    const w = await holdingWorker();
    await queue.addBulk(['s-1', 's-2', 's-3', 's-4'].map((jobId) => ({ name: 'step', data: {}, opts: { jobId } })));
    await until('the jobs to start', 10_000, async () => w.held.size === 4);
    // Three processes' watchers of the same queue, passes a minute apart (each tick below is one pass).
    const watchers = ['a', 'b', 'c'].map(
      (id) => new OwnerWatch(h.ctx, [{ shard: 0, worker: { id } }], { intervalMs: 60_000, maxStalledCount: 5 }),
    );
    // This queue's locks only: MONITOR sees every client of the server, and the suite's other files run beside this one.
    const prefix = h.ctx.keys.queueKeyPrefix(0);
    const locksRead = async (passes: () => Promise<unknown>): Promise<number> =>
      (await commandsDuring(passes, true)).filter((c) => {
        const key = c.args[1]?.toString() ?? '';
        return c.args[0]!.toString().toUpperCase() === 'GET' && key.startsWith(prefix) && key.endsWith(':lock');
      }).length;
    // One scan: four locks read, whichever of the watchers passes first; the others read its answer.
    expect(await locksRead(() => Promise.all(watchers.map((x) => x.tick())))).toBe(4);
    expect(await locksRead(() => watchers[0]!.tick())).toBe(0);
    expect(await h.ctx.redis.pttl(h.ctx.keys.queueStateKeys(0).ownersScan)).toBeGreaterThan(0);

    // The owner dies: the kept scan still names it, so the next pass finds it gone and moves its jobs, and lets the
    // scan go; the next pass scans the queue as it is then (nothing active: no lock to read).
    w.conn.disconnect();
    await closed(w.clientId, 'the connection to close');
    await watchers[1]!.tick();
    expect(await queue.getActiveCount()).toBe(0);
    expect(await h.ctx.redis.exists(h.ctx.keys.queueStateKeys(0).ownersScan)).toBe(0);
    await watchers[2]!.tick();
    expect(await h.ctx.redis.get(h.ctx.keys.queueStateKeys(0).ownersScan)).toBe('');
  });

  it('a connection that comes back starts a pass at once: its workers are renamed though passes are a minute apart', async () => {
    const { conn, worker, watch, drop } = await loneWatcher();
    const before = worker.id;
    expect(before).toBe(`w@${await ownerOfConnection(conn)}`);
    watch.start();
    await drop();
    const after = await until('the worker renamed after its new connection', 10_000, async () =>
      worker.id !== before ? worker.id : undefined,
    );
    expect(after).toBe(`w@${await ownerOfConnection(conn)}`);
    expect(watch.isCurrent(`${before}:1`)).toBe(false);
  });

  it("a pass asks the server for its connection's id only when the connection is a new one", async () => {
    const { conn, worker, watch, drop } = await loneWatcher();
    const idsAsked = async (passes: () => Promise<unknown>): Promise<number> => {
      // The watcher's connection as MONITOR names its client (other files' clients share the server).
      const client = `${conn.stream.localAddress}:${conn.stream.localPort}`;
      return (await commandsDuring(passes)).filter(
        (c) => c.client === client && c.args.slice(0, 2).join(' ').toUpperCase() === 'CLIENT ID',
      ).length;
    };
    const passes = (n: number) => async () => {
      for (let i = 0; i < n; i++) await watch.tick();
    };
    expect(await idsAsked(passes(3))).toBe(0);
    // A new connection (the server dropped the old one): its id is asked once, then kept again.
    const before = worker.id;
    await drop();
    await until('the connection to come back', 10_000, async () => conn.status === 'ready' && (await conn.ping()));
    expect(await idsAsked(passes(2))).toBe(1);
    expect(worker.id).not.toBe(before);
  });

  it("a node with many owners: each watcher passes and probes less often, the node still often, and a dead owner's jobs still move", async () => {
    const fleet = 3 * WATCH_SPREAD; // a spread of 3
    const conns = Array.from({ length: fleet }, () => new Redis(redisUrl(), { maxRetriesPerRequest: null }));
    closers.push(async () => conns.forEach((c) => c.disconnect()));
    const owners = await Promise.all(conns.map((c) => ownerOfConnection(c)));
    // Two active jobs locked by each owner, as a loaded fleet's workers hold theirs.
    const jobs = owners.flatMap((owner, w) => [0, 1].map((n) => ({ id: `m${w}x${n}.s1`, owner, n })));
    const { active } = h.ctx.keys.queueStateKeys(0);
    const writes = h.ctx.redis.pipeline().rpush(active, ...jobs.map((j) => j.id));
    for (const j of jobs) writes.set(h.ctx.keys.jobLock(0, j.id), `w-${j.owner}@${j.owner}:${j.n}`, 'PX', 600_000);
    await writes.exec();
    const counts = owners.map(() => ({ passes: 0, probes: 0 }));
    const watches = conns.map((redis, w) => {
      const watch = new OwnerWatch({ ...h.ctx, redis }, [{ shard: 0, worker: { id: `w-${owners[w]}` } }], {
        intervalMs: 100,
        probeMs: 20,
        maxStalledCount: 5,
      });
      const [tick, probe] = [watch.tick.bind(watch), watch.probe.bind(watch)];
      watch.tick = () => tick().finally(() => counts[w]!.passes++);
      watch.probe = () => probe().finally(() => counts[w]!.probes++);
      return watch;
    });
    closers.push(() => Promise.all(watches.map((x) => x.stop())));
    for (const x of watches) await x.name();
    for (const x of watches) await x.tick(); // each finds the fleet, and so its spread
    for (const c of counts) Object.assign(c, { passes: 0, probes: 0 });
    for (const x of watches) x.start();
    const windowMs = 2_000;
    await new Promise((r) => setTimeout(r, windowMs));
    const passes = counts.reduce((s, c) => s + c.passes, 0);
    const probes = counts.reduce((s, c) => s + c.probes, 0);
    // Unspread, each watcher would pass windowMs / 100 times and probe windowMs / 20 times (480 and 2,400 here).
    expect(watchSpread(fleet)).toBe(3);
    expect(passes).toBeLessThan((fleet * windowMs) / 100 / 2);
    expect(probes).toBeLessThan((fleet * windowMs) / 20 / 2);
    // ...and the node is still passed over and probed often: about WATCH_SPREAD passes a period between them.
    expect(passes).toBeGreaterThan(windowMs / 100);
    expect(await h.ctx.redis.llen(active)).toBe(jobs.length); // no live owner robbed

    // One owner dies (its watch with it): its jobs are moved back to wait, and only its.
    await watches[5]!.stop();
    const dead = await conns[5]!.client('ID');
    conns[5]!.disconnect();
    await closed(Number(dead), 'the connection to close');
    await until(
      'its jobs to go back to wait',
      10_000,
      async () => (await h.ctx.redis.llen(active)) === jobs.length - 2,
    );
    const waiting = await h.ctx.redis.lrange(h.ctx.keys.queueStateKeys(0).wait, 0, -1);
    expect(waiting.sort()).toEqual(['m5x0.s1', 'm5x1.s1']);
  });
});
