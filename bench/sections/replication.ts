/**
 * Section "replication": what waiting for a replica costs (REDIS_MIN_REPLICAS=1 against 0, docs/failover.md). A
 * replica of the bench's Redis follows it on loopback; the same worker processes' code runs with the waits on and
 * off, in alternating rounds. The workload is the one-effect run (ten steps, step 2 sends an email through the
 * ledger), so a round has one wait per run: the dispatch's. Reported: worker and Redis CPU per step and per effect,
 * and the latency of the effect step of a run alone (its wait included) and of every step under load.
 */
import { startEmbeddedRedis } from '../../testkit/embeddedRedis.js';
import { WorkerPool } from '../lib/pool.js';
import { dist, median, round } from '../lib/stats.js';
import type { BenchEnv, BenchOptions, Metric, Section, SectionResult } from '../lib/types.js';
import { runRound, type RoundResult } from '../lib/workload.js';

type Mode = 'off' | 'on';
const STEPS = 10;
/** The step that sends the email (oneEffectScript's default). */
const EFFECT_STEP = 2;

/** A replica of the bench's Redis, online; stopped by the caller (a replica left attached costs the next sections). */
async function replicaOf(env: BenchEnv): Promise<{ stop(): Promise<void> }> {
  const replica = await startEmbeddedRedis({
    appendfsync: 'everysec',
    extraArgs: ['--replicaof', '127.0.0.1', String(env.redis.port)],
  });
  env.onCleanup(() => replica.stop());
  for (let i = 0; i < 400; i++) {
    if (/slave0:.*state=online/.test(await env.admin.info('replication'))) return replica;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('the replica did not come online');
}

function poolEnv(env: BenchEnv, mode: Mode): Record<string, string> {
  return {
    ...(process.env.PATH ? { PATH: process.env.PATH } : {}),
    ...(process.env.HOME ? { HOME: process.env.HOME } : {}),
    ...env.appEnv,
    REDIS_MIN_REPLICAS: mode === 'on' ? '1' : '0',
    REDIS_REPLICA_WAIT_MS: '1000',
  };
}

export const replication: Section = {
  name: 'replication',
  title: 'Replication waits: REDIS_MIN_REPLICAS=1 against 0 (one replica on loopback, one-effect runs, 1 process)',
  async run(env: BenchEnv, opts: BenchOptions): Promise<SectionResult> {
    const rounds = Math.max(1, opts.rounds);
    const loaded = opts.quick ? { chains: 20, steps: STEPS } : { chains: 50, steps: STEPS };
    const alone = opts.quick ? 5 : 15;
    const replica = await replicaOf(env);
    const pools: Record<Mode, WorkerPool> = {
      off: await WorkerPool.start(1, { env: poolEnv(env, 'off') }),
      on: await WorkerPool.start(1, { env: poolEnv(env, 'on') }),
    };
    env.onCleanup(() => Promise.all([pools.off.kill(), pools.on.kill()]).then(() => undefined));
    const byMode: Record<Mode, { loaded: RoundResult[]; effectMs: number[]; stepMs: number[] }> = {
      off: { loaded: [], effectMs: [], stepMs: [] },
      on: { loaded: [], effectMs: [], stepMs: [] },
    };
    for (const mode of ['off', 'on'] as Mode[])
      await runRound(env, pools[mode], { kind: 'effects', ...loaded, tag: `rw-${mode}` });
    for (let r = 0; r < rounds; r++) {
      const order: Mode[] = r % 2 === 0 ? ['off', 'on'] : ['on', 'off'];
      for (const mode of order) {
        const pool = pools[mode];
        byMode[mode].loaded.push(
          await runRound(env, pool, { kind: 'effects', ...loaded, tag: `rl${r}-${mode}`, recordLatency: true }),
        );
        for (let i = 0; i < alone; i++) {
          const one = await runRound(env, pool, {
            kind: 'effects',
            chains: 1,
            steps: STEPS,
            tag: `ra${r}-${i}-${mode}`,
            recordLatency: true,
          });
          // One chain in one process: latencies in step order.
          byMode[mode].effectMs.push(one.latencies[EFFECT_STEP - 1]!);
        }
        byMode[mode].stepMs.push(...byMode[mode].loaded.at(-1)!.latencies);
      }
    }
    await Promise.all([pools.off.kill(), pools.on.kill()]);
    await replica.stop();
    return report(this, byMode, loaded, rounds, alone);
  },
};

function report(
  section: Section,
  byMode: Record<Mode, { loaded: RoundResult[]; effectMs: number[]; stepMs: number[] }>,
  loaded: { chains: number; steps: number },
  rounds: number,
  alone: number,
): SectionResult {
  const per = (mode: Mode, f: (r: RoundResult) => number) => median(byMode[mode].loaded.map(f));
  const cpu = { off: per('off', (r) => r.nodeCpuUsPerStep), on: per('on', (r) => r.nodeCpuUsPerStep) };
  const redisCpu = { off: per('off', (r) => r.redisCpuUsPerStep), on: per('on', (r) => r.redisCpuUsPerStep) };
  const rate = { off: per('off', (r) => r.stepsPerSec), on: per('on', (r) => r.stepsPerSec) };
  const effect = { off: dist(byMode.off.effectMs), on: dist(byMode.on.effectMs) };
  const step = { off: dist(byMode.off.stepMs), on: dist(byMode.on.stepMs) };
  const both = (off: number, on: number, digits = 1) => `off ${round(off, digits)} / on ${round(on, digits)}`;
  const metrics: Metric[] = [
    {
      key: 'worker_cpu_us_per_step',
      label: 'worker CPU per step (waits on - off)',
      value: round(cpu.on - cpu.off, 1),
      unit: 'µs',
      note: both(cpu.off, cpu.on),
    },
    {
      key: 'worker_cpu_us_per_effect',
      label: 'worker CPU per effect (waits on - off)',
      value: round((cpu.on - cpu.off) * loaded.steps, 1),
      unit: 'µs',
      note: `one effect per ${loaded.steps} steps`,
    },
    {
      key: 'redis_cpu_us_per_effect',
      label: 'Redis CPU per effect (waits on - off)',
      value: round((redisCpu.on - redisCpu.off) * loaded.steps, 1),
      unit: 'µs',
      note: both(redisCpu.off, redisCpu.on),
    },
    {
      key: 'effect_step_p50_ms',
      label: 'effect step latency p50, a run alone (on - off)',
      value: round(effect.on.p50 - effect.off.p50, 3),
      unit: 'ms',
      note: `${both(effect.off.p50, effect.on.p50, 3)}; p99 ${both(effect.off.p99, effect.on.p99, 3)}`,
    },
    {
      key: 'step_p99_ms',
      label: `step latency p99, ${loaded.chains} runs at once (on - off)`,
      value: round(step.on.p99 - step.off.p99, 3),
      unit: 'ms',
      note: `p50 ${both(step.off.p50, step.on.p50, 3)}`,
    },
    {
      key: 'throughput_ratio',
      label: 'steps/s, waits on / off',
      value: round(rate.on / rate.off, 3),
      unit: 'x',
      note: both(rate.off, rate.on, 0),
    },
  ];
  return { name: section.name, title: section.title, metrics, details: { rounds, alone, loaded, cpu, redisCpu, rate } };
}
