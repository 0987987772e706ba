/**
 * `node dist/bench/stepCpu.js [cycles] [--procs=1] [--chains=100] [--steps=40] [--node-flags='<flags>']` (after
 * `npm run build`; default 8): worker CPU per read-only step of this tree, against the plain BullMQ chain in the same worker
 * processes: 4 warm-up cycles, then `cycles` cycles of one plain and one engine round (`chains` runs of `steps` steps,
 * concurrency 20 per process, `procs` worker processes started with `node-flags`, and the reconciler's compactor in
 * a process of its own, as a fleet runs it). Prints the medians of Node CPU per step (process.cpuUsage of the workers
 * and the compactor, each part apart) and Redis's (INFO of the bench's own redis-server), the median of
 * the paired engine / plain worker CPU ratios, and Redis commands per step. About 30 s; for comparing two trees, run
 * it in each, alternating.
 */
import { createBenchEnv } from './lib/env.js';
import { runRound, type RoundKind } from './lib/workload.js';
import { installClientCounter } from './lib/clientCounter.js';
import { median } from './lib/stats.js';
import { flag, positionals } from './lib/args.js';

installClientCounter();
const cycles = Number(positionals()[0] ?? 8);
const procs = Number(flag('procs', '1'));
const chains = Number(flag('chains', '100'));
const steps = Number(flag('steps', '40'));
const workerNodeFlags = flag('node-flags', '').split(' ').filter(Boolean);
const WARM_UP = 4;
const env = await createBenchEnv({ quick: false, rounds: cycles, workerNodeFlags });
try {
  const pool = await env.spawnPool(procs);
  const kinds: RoundKind[] = ['plain', 'engine'];
  const seen = Object.fromEntries(
    kinds.map((k) => [
      k,
      {
        worker: [] as number[],
        main: [] as number[],
        compactor: [] as number[],
        redis: [] as number[],
        calls: [] as number[],
      },
    ]),
  );
  for (let i = 0; i < WARM_UP + cycles; i++) {
    for (const kind of kinds) {
      const r = await runRound(env, pool, { kind, chains, steps, tag: `c${i}` });
      if (i < WARM_UP) continue;
      seen[kind]!.worker.push(r.nodeCpuUsPerStep);
      seen[kind]!.main.push(r.nodeMainUsPerStep);
      seen[kind]!.compactor.push(r.compactorCpuUsPerStep);
      seen[kind]!.redis.push(r.redisCpuUsPerStep);
      seen[kind]!.calls.push(r.redisCallsPerStep);
    }
  }
  await pool.kill();
  const [plain, engine] = [seen.plain!, seen.engine!];
  const ratios = engine.worker.map((w, i) => w / plain.worker[i]!);
  const f = (n: number) => n.toFixed(1);
  console.log(
    `Node CPU µs/step (workers + compactor): plain ${f(median(plain.worker))}, engine ${f(median(engine.worker))}`,
  );
  console.log(`engine / plain Node CPU, median of ${cycles} paired cycles: ${median(ratios).toFixed(2)}`);
  console.log(
    `of it the workers' main threads, µs/step: plain ${f(median(plain.main))}, engine ${f(median(engine.main))}`,
  );
  console.log(
    `of it the compactor, µs/step: plain ${f(median(plain.compactor))}, engine ${f(median(engine.compactor))}`,
  );
  console.log(`Redis CPU µs/step: plain ${f(median(plain.redis))}, engine ${f(median(engine.redis))}`);
  console.log(`Redis commands/step: plain ${f(median(plain.calls))}, engine ${f(median(engine.calls))}`);
} finally {
  await env.cleanup();
}
