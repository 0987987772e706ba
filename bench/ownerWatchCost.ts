/**
 * `node dist/bench/ownerWatchCost.js [workers...] [--concurrency=20] [--seconds=5]` (after `npm run build`; default
 * workers 5 20 50): what a fleet's owner watches cost the Redis server, by the fleet's size. For each size W: W
 * watchers (src/worker/ownerWatch.ts, the fleet's settings: a pass every OWNER_WATCH_MS, a probe every OWNER_PROBE_MS),
 * each on a connection of its own as each worker process has, and W x concurrency active jobs on one shard locked by
 * those W connections (a fleet at full load; every owner alive, so nothing is moved). Prints the server's CPU per second
 * of wall time (INFO cpu) and the commands it ran per second (scripts' own calls included) over `seconds`. Not part of
 * `npm run bench`.
 */
import { Redis } from 'ioredis';
import { createBenchEnv } from './lib/env.js';
import { flag, positionals } from './lib/args.js';
import { delta, snapshot } from './lib/redisInfo.js';
import { OwnerWatch } from '../src/worker/ownerWatch.js';
import { ownerOfConnection } from '../src/store/owners.js';

const sizes = positionals().map(Number);
const concurrency = Number(flag('concurrency', '20'));
const seconds = Number(flag('seconds', '5'));
const env = await createBenchEnv({ quick: true, rounds: 1 });
const { keys, log, metrics, cfg } = env.ctx;
try {
  for (const workers of sizes.length > 0 ? sizes : [5, 20, 50]) {
    await env.reset();
    const conns = Array.from({ length: workers }, () => new Redis(env.redis.url, { maxRetriesPerRequest: null }));
    const owners = await Promise.all(conns.map((c) => ownerOfConnection(c)));
    const jobs = owners.flatMap((owner, w) =>
      Array.from({ length: concurrency }, (_, n) => ({ id: `r${w}x${n}.s1`, owner })),
    );
    const active = keys.queueStateKeys(0).active;
    const writes = env.ctx.redis.pipeline().rpush(active, ...jobs.map((j) => j.id));
    jobs.forEach((j, n) => writes.set(keys.jobLock(0, j.id), `bench-${j.owner}@${j.owner}:${n}`, 'PX', 600_000));
    await writes.exec();
    const watches = conns.map(
      (redis, w) =>
        new OwnerWatch({ redis, keys, log, metrics }, [{ shard: 0, worker: { id: `bench-${owners[w]}` } }], {
          intervalMs: cfg.OWNER_WATCH_MS,
          probeMs: cfg.OWNER_PROBE_MS,
          maxStalledCount: cfg.MAX_STALLED_COUNT,
        }),
    );
    for (const w of watches) await w.name();
    for (const w of watches) w.start();
    // Past every watcher's first pass, then the window.
    await new Promise((r) => setTimeout(r, 2 * cfg.OWNER_WATCH_MS));
    const before = await snapshot(env.admin);
    await new Promise((r) => setTimeout(r, seconds * 1000));
    const d = delta(before, await snapshot(env.admin));
    await Promise.all(watches.map((w) => w.stop()));
    conns.forEach((c) => c.disconnect());
    if ((await env.ctx.redis.llen(active)) !== jobs.length) throw new Error('a live owner lost a job');
    console.log(
      `${workers} workers, ${jobs.length} active jobs: Redis CPU ${(d.cpuUs / 1000 / seconds).toFixed(1)} ms/s, ` +
        `${Math.round(d.calls / seconds)} commands/s`,
    );
  }
} finally {
  await env.cleanup();
}
