/**
 * Section "cluster": engine throughput (read-only steps) on a local 3-master
 * Redis Cluster vs the bench's single Redis, same worker processes count, same
 * SHARDS (6 step queues, so runs spread over every master of the cluster),
 * same concurrency. Rounds alternate single / cluster; each round starts from
 * empty Redis (FLUSHALL on every master) with fresh run ids.
 *
 * The cluster is testkit/cluster.ts's: three `redis-server
 * --cluster-enabled yes` on free ports, AOF on (everysec, as the bench's own
 * Redis), joined with `redis-cli --cluster create`. On this 2-core machine the
 * three servers share the cores with the workers, so this shows that the
 * engine runs on a cluster and what routing costs, not how it scales out.
 */
import { Redis } from 'ioredis';
import { loadConfig } from '../../src/config/config.js';
import { createContext } from '../../src/server/buildContext.js';
import type { EngineContext } from '../../src/runs/engineContext.js';
import { createLogger } from '../../src/metrics/log.js';
import { newMetrics } from '../../src/metrics/metrics.js';
import { redisServerOnPath } from '../../testkit/embeddedRedis.js';
import { startLocalCluster } from '../../testkit/cluster.js';
import { WorkerPool } from '../lib/pool.js';
import { median, round } from '../lib/stats.js';
import type { BenchEnv, BenchOptions, Metric, Section, SectionResult } from '../lib/types.js';
import { createRun, readOnlyScript } from '../lib/workload.js';

const SHARDS = 6;
const PROCS = 2;

interface Target {
  name: 'single' | 'cluster';
  ctx: EngineContext;
  pool: WorkerPool;
  /** Masters (admin connections) to FLUSHALL between rounds. */
  masters: Redis[];
}

async function flush(t: Target, env: BenchEnv): Promise<void> {
  if (t.name === 'single') return env.reset();
  await Promise.all(t.masters.map((m) => m.flushall()));
}

async function round1(env: BenchEnv, t: Target, chains: number, steps: number, tag: string): Promise<number> {
  await flush(t, env);
  const runIds = await Promise.all(
    Array.from({ length: chains }, (_, i) =>
      createRun(t.ctx, `${tag}-${t.name}-${i}`, readOnlyScript(steps), { maxSteps: steps + 10 }),
    ),
  );
  await t.pool.prepare({ kind: 'engine', queueName: 'unused', recordLatency: false });
  await t.pool.go();
  const goAt = t.pool.goAt;
  let lastAt: number;
  try {
    lastAt = await t.pool.waitFor(chains * steps, 180_000);
  } finally {
    const stats = await t.pool.finish().catch(() => []);
    const failures = stats.flatMap((s) => s.failures);
    if (failures.length) throw new Error(`${t.name} round: jobs failed: ${failures.join('; ')}`);
  }
  const statuses = await Promise.all(runIds.map((id) => t.ctx.redis.hget(t.ctx.keys.run(id).run, 'status')));
  const bad = statuses.filter((s) => s !== 'completed').length;
  if (bad) throw new Error(`${t.name} round: ${bad} of ${chains} runs did not complete`);
  return (chains * steps * 1000) / (lastAt - goAt);
}

export const cluster: Section = {
  name: 'cluster',
  title: `Engine throughput on a 3-master Redis Cluster vs a single Redis (read-only steps, ${SHARDS} shards, ${PROCS} worker processes)`,
  async run(env: BenchEnv, opts: BenchOptions): Promise<SectionResult> {
    if (!redisServerOnPath()) throw new Error('redis-server is not on PATH: cannot start a local cluster');
    const sz = opts.quick ? { chains: 60, steps: 20, warm: 1 } : { chains: 120, steps: 40, warm: 2 };
    const rounds = opts.rounds;
    const local = await startLocalCluster(3);
    env.onCleanup(() => local.stop());
    const childBase = {
      ...(process.env.PATH ? { PATH: process.env.PATH } : {}),
      ...(process.env.HOME ? { HOME: process.env.HOME } : {}),
      ...env.appEnv,
      SHARDS: String(SHARDS),
    };
    const clusterEnv = { ...childBase, REDIS_CLUSTER_NODES: local.nodes.join(',') };
    const mkCtx = async (e: Record<string, string>, name: string) => {
      const cfg = loadConfig(e);
      const ctx = await createContext(cfg, name, { log: createLogger(name, cfg.LOG_LEVEL), metrics: newMetrics() });
      env.onCleanup(() => ctx.close());
      return ctx;
    };
    const masters = local.nodes.map((hp) => new Redis(`redis://${hp}`, { maxRetriesPerRequest: null }));
    env.onCleanup(() => masters.forEach((m) => m.disconnect()));
    const single: Target = {
      name: 'single',
      ctx: await mkCtx(childBase, 'bench-single6'),
      pool: await WorkerPool.start(PROCS, { env: childBase }),
      masters: [env.admin],
    };
    env.onCleanup(() => single.pool.kill());
    const clus: Target = {
      name: 'cluster',
      ctx: await mkCtx(clusterEnv, 'bench-cluster'),
      pool: await WorkerPool.start(PROCS, { env: clusterEnv }),
      masters,
    };
    env.onCleanup(() => clus.pool.kill());

    const results: Record<'single' | 'cluster', number[]> = { single: [], cluster: [] };
    const warm: Record<'single' | 'cluster', number[]> = { single: [], cluster: [] };
    const keysPerNode: number[] = [];
    try {
      for (let w = 0; w < sz.warm; w++) {
        for (const t of [single, clus])
          warm[t.name].push(Math.round(await round1(env, t, sz.chains, sz.steps, `cw${w}`)));
      }
      for (let r = 0; r < rounds; r++) {
        // Alternate which goes first, so a slow phase of the machine does not favour one side.
        const order = r % 2 === 0 ? [single, clus] : [clus, single];
        for (const t of order) results[t.name].push(await round1(env, t, sz.chains, sz.steps, `c${r}`));
      }
      for (const m of masters) keysPerNode.push(await m.dbsize());
    } finally {
      await Promise.all([single.pool.kill(), clus.pool.kill()]);
    }
    const s = median(results.single);
    const c = median(results.cluster);
    const paired = results.single.map((x, i) => results.cluster[i]! / x);
    const ratio = median(paired);
    const metrics: Metric[] = [
      {
        key: 'single_steps_per_s',
        label: `single Redis, SHARDS=${SHARDS}`,
        value: round(s, 0),
        unit: 'steps/s',
        note: results.single.map((x) => Math.round(x)).join(', '),
      },
      {
        key: 'cluster_steps_per_s',
        label: `3-master cluster, SHARDS=${SHARDS}`,
        value: round(c, 0),
        unit: 'steps/s',
        note: results.cluster.map((x) => Math.round(x)).join(', '),
      },
      {
        key: 'cluster_ratio',
        label: 'cluster / single (median of paired rounds)',
        value: round(ratio, 3),
        unit: 'x',
        note: paired.map((x) => round(x, 2)).join(', '),
      },
    ];
    return {
      name: this.name,
      title: this.title,
      metrics,
      tables: [
        {
          title:
            `${rounds} measured round(s) after ${sz.warm} warm-up round(s) each; ${sz.chains} runs x ${sz.steps} read-only steps per round; ${PROCS} worker processes, WORKER_CONCURRENCY 20 per shard queue; keys per master after the last round: ${keysPerNode.join(' / ')}. ` +
            'All of it on 2 shared cores: 3 redis-server processes compete with the workers, so this measures the routing cost (ioredis Cluster client, per-slot pipelines), not scale-out.',
          header: ['target', 'warm-up steps/s', 'steps/s per round', 'median'],
          rows: [
            [
              'single Redis',
              warm.single.join(', '),
              results.single.map((x) => Math.round(x)).join(', '),
              Math.round(s),
            ],
            [
              '3-master cluster',
              warm.cluster.join(', '),
              results.cluster.map((x) => Math.round(x)).join(', '),
              Math.round(c),
            ],
          ],
        },
      ],
      details: {
        shards: SHARDS,
        procs: PROCS,
        ...sz,
        rounds,
        single: results.single,
        cluster: results.cluster,
        paired,
        warm,
        keysPerNode,
        nodes: local.nodes,
      },
    };
  },
};
