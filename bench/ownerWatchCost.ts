/**
 * `node dist/bench/ownerWatchCost.js [workers...] [--concurrency=20] [--seconds=5] [--deaths=10]` (after `npm run
 * build`; default workers 5 20 50): what a fleet's owner watches cost the Redis server, by the fleet's size, and how
 * soon they find a death. For each size W: W watchers (src/worker/ownerWatch.ts, the fleet's settings: a pass every
 * OWNER_WATCH_MS, a probe every OWNER_PROBE_MS), each on a connection of its own as each worker process has, and W x
 * concurrency active jobs on one shard locked by those W connections (a fleet at full load; every owner alive, so
 * nothing is moved). Prints the server's CPU per second of wall time (INFO cpu) and the commands it ran per second
 * (scripts' own calls included) over `seconds`; then `deaths` owners die one after another (the watch stopped, the
 * connection closed) and it prints the time from each close to its jobs back in wait (median, slowest). The watchers
 * share this one process's event loop, where a fleet's have a process each. Not part of `npm run bench`.
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
const deaths = Number(flag('deaths', '10'));
const env = await createBenchEnv({ quick: true, rounds: 1 });
const { keys, log, metrics, cfg } = env.ctx;

/** Owners die one after another, each a pass period after the last was found: ms from each close to its jobs in wait. */
async function deathsFound(watches: OwnerWatch[], conns: Redis[], n: number): Promise<string> {
  if (n <= 0) return '(none killed)';
  const wait = keys.queueStateKeys(0).wait;
  const took: number[] = [];
  for (let i = 0; i < n; i++) {
    const victim = (i * 7) % conns.length; // spread over the ring, never the same twice for n below the fleet
    await watches[victim]!.stop();
    const waiting = await env.admin.llen(wait);
    const t0 = performance.now();
    conns[victim]!.disconnect();
    while ((await env.admin.llen(wait)) < waiting + concurrency) {
      if (performance.now() - t0 > 10_000) throw new Error(`owner ${victim}'s jobs not moved within 10 s`);
      await new Promise((r) => setTimeout(r, 1));
    }
    took.push(performance.now() - t0);
    await new Promise((r) => setTimeout(r, cfg.OWNER_WATCH_MS));
  }
  took.sort((a, b) => a - b);
  return `${took[Math.floor(took.length / 2)]!.toFixed(0)} ms median, ${took.at(-1)!.toFixed(0)} ms slowest (${n})`;
}

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
    if ((await env.ctx.redis.llen(active)) !== jobs.length) throw new Error('a live owner lost a job');
    const found = await deathsFound(watches, conns, Math.min(deaths, workers - 1));
    await Promise.all(watches.map((w) => w.stop()));
    conns.forEach((c) => c.disconnect());
    console.log(
      `${workers} workers, ${jobs.length} active jobs: Redis CPU ${(d.cpuUs / 1000 / seconds).toFixed(1)} ms/s, ` +
        `${Math.round(d.calls / seconds)} commands/s; a death found in ${found}`,
    );
  }
} finally {
  await env.cleanup();
}
