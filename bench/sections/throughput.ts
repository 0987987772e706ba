/**
 * Section "throughput": steps/s of the plain BullMQ chain vs the engine
 * (read-only steps, and with one ledger effect per run), same Redis, same
 * concurrency, in the same bench run, with 1 and 2 worker processes.
 * Rounds alternate the kinds; medians are reported.
 */
import {
  atLeast,
  type BenchEnv,
  type BenchOptions,
  type Metric,
  type Section,
  type SectionResult,
} from '../lib/types.js';
import { median, round } from '../lib/stats.js';
import { runRound, warmUp, type RoundKind, type RoundResult, type WarmUpResult } from '../lib/workload.js';
import { SCRIPT_COMMANDS } from '../lib/redisInfo.js';

/** The engine's read-only steps against the plain chain: the median of the paired rounds at least this... */
export const READ_ONLY_TARGET = 0.95;
/** ...and no paired round under this. */
export const READ_ONLY_FLOOR = 0.9;

interface Sizes {
  chains: number;
  steps: number;
  warm: { minCycles: number; maxCycles: number };
}

function sizes(opts: BenchOptions): Sizes {
  return opts.quick
    ? { chains: 30, steps: 30, warm: { minCycles: 3, maxCycles: 4 } }
    : { chains: 100, steps: 40, warm: { minCycles: 2, maxCycles: 5 } };
}

const KINDS: RoundKind[] = ['plain', 'engine', 'effects'];

export const throughput: Section = {
  name: 'throughput',
  title: 'Step throughput: plain BullMQ chain vs engine (WORKER_CONCURRENCY 20, embedded Redis, AOF everysec)',
  async run(env: BenchEnv, opts: BenchOptions): Promise<SectionResult> {
    const sz = sizes(opts);
    const metrics: Metric[] = [];
    const breakdown: (string | number)[][] = [];
    const warmups: Record<string, WarmUpResult> = {};
    const details: Record<string, unknown> = { chains: sz.chains, steps: sz.steps, rounds: opts.rounds, warmups };
    for (const procs of [1, 2]) {
      const pool = await env.spawnPool(procs);
      const results: Record<RoundKind, RoundResult[]> = { plain: [], engine: [], effects: [] };
      try {
        const w = await warmUp(
          env,
          pool,
          KINDS,
          { chains: sz.chains, steps: sz.steps },
          { ...sz.warm, tag: `w${procs}` },
        );
        warmups[`${procs}p`] = w;
        for (let r = 0; r < opts.rounds; r++) {
          const order = r % 2 === 0 ? KINDS : [...KINDS].reverse();
          for (const kind of order) {
            results[kind].push(
              await runRound(env, pool, { kind, chains: sz.chains, steps: sz.steps, tag: `p${procs}r${r}` }),
            );
          }
        }
      } finally {
        await pool.kill();
      }
      const med = (k: RoundKind) => median(results[k].map((x) => x.stepsPerSec));
      const per = (k: RoundKind) => results[k].map((x) => round(x.stepsPerSec, 0)).join(' / ');
      const plain = med('plain');
      const engine = med('engine');
      const effects = med('effects');
      // Ratios are paired per round (the rounds of one cycle run back to back, so a burst of
      // outside load hits both sides); the median of the paired ratios is the headline.
      const paired = (k: RoundKind) => results[k].map((e, i) => e.stepsPerSec / results.plain[i]!.stepsPerSec);
      const ratios = paired('engine');
      const effRatios = paired('effects');
      // CPU spent per step (worker processes, the compactor + Redis) hardly depends on outside load: on a
      // CPU-bound box plainCPU/engineCPU predicts the steady-state throughput ratio.
      const cpu = (k: RoundKind) => median(results[k].map((x) => x.nodeCpuUsPerStep + x.redisCpuUsPerStep));
      const p = `${procs}p`;
      metrics.push(
        {
          key: `plain_${p}`,
          label: `plain chain, ${procs} proc`,
          value: round(plain, 0),
          unit: 'steps/s',
          note: `rounds ${per('plain')}`,
        },
        {
          key: `engine_${p}`,
          label: `engine read-only, ${procs} proc`,
          value: round(engine, 0),
          unit: 'steps/s',
          note: `rounds ${per('engine')}`,
        },
        atLeast(
          `ratio_${p}`,
          `engine/plain, ${procs} proc (median of paired rounds)`,
          round(median(ratios), 3),
          'x',
          READ_ONLY_TARGET,
          `rounds ${ratios.map((x) => round(x, 2)).join(' / ')}; ratio of medians ${round(engine / plain, 2)}`,
        ),
        atLeast(
          `ratio_lowest_${p}`,
          `engine/plain, ${procs} proc (lowest paired round)`,
          round(Math.min(...ratios), 3),
          'x',
          READ_ONLY_FLOOR,
        ),
        {
          key: `cpu_ratio_${p}`,
          label: `CPU/step plain/engine (worker+Redis), ${procs} proc`,
          value: round(cpu('plain') / cpu('engine'), 3),
          unit: 'x',
          note: `${round(cpu('plain'), 0)} vs ${round(cpu('engine'), 0)} µs/step`,
        },
        {
          key: `effects_${p}`,
          label: `engine + 1 ledger effect/run, ${procs} proc`,
          value: round(effects, 0),
          unit: 'steps/s',
          note: `rounds ${per('effects')}`,
        },
        {
          key: `effects_ratio_${p}`,
          label: `engine+effect/plain, ${procs} proc (paired)`,
          value: round(median(effRatios), 3),
          unit: 'x',
          target: 'report only',
          note: `rounds ${effRatios.map((x) => round(x, 2)).join(' / ')}; CPU/step ${round(cpu('effects'), 0)} µs`,
        },
      );
      for (const k of KINDS) {
        const rs = results[k];
        const m = (f: (x: RoundResult) => number) => round(median(rs.map(f)), 1);
        const scriptsPerStep = median(
          rs.map(
            (x) =>
              Object.entries(x.clientByCommand)
                .filter(([n]) => SCRIPT_COMMANDS.has(n))
                .reduce((s, [, v]) => s + v, 0) / x.jobs,
          ),
        );
        breakdown.push([
          `${k} ${procs}p`,
          m((x) => x.nodeCpuUsPerStep),
          m((x) => x.compactorCpuUsPerStep),
          m((x) => x.packTailMs),
          m((x) => x.redisCpuUsPerStep),
          m((x) => x.clientCmdsPerStep),
          round(scriptsPerStep, 2),
          m((x) => x.redisCallsPerStep),
          m((x) => x.redisBytesPerStep),
          m((x) => x.aofBytesPerStep),
        ]);
      }
      details[p] = Object.fromEntries(
        KINDS.map((k) => [
          k,
          results[k].map((x) => ({
            stepsPerSec: round(x.stepsPerSec, 0),
            wallMs: round(x.wallMs, 1),
            packTailMs: round(x.packTailMs, 1),
            nodeCpuUsPerStep: round(x.nodeCpuUsPerStep, 1),
            compactorCpuUsPerStep: round(x.compactorCpuUsPerStep, 1),
            redisCpuUsPerStep: round(x.redisCpuUsPerStep, 1),
            clientCmdsPerStep: round(x.clientCmdsPerStep, 2),
            redisCallsPerStep: round(x.redisCallsPerStep, 2),
            redisBytesPerStep: round(x.redisBytesPerStep, 0),
            aofBytesPerStep: round(x.aofBytesPerStep, 0),
            clientCommandsPerStep: Object.fromEntries(
              Object.entries(x.clientByCommand).map(([n, v]) => [n, round(v / x.jobs, 3)]),
            ),
            redisCommandsPerStep: Object.fromEntries(
              Object.entries(x.redis.byCommand).map(([n, v]) => [
                n,
                { calls: round(v.calls / x.jobs, 3), usec: round(v.usec / x.jobs, 2) },
              ]),
            ),
          })),
        ]),
      );
    }
    return {
      name: this.name,
      title: this.title,
      metrics,
      details,
      tables: [
        {
          title: 'Cost per step (medians): where the time goes',
          header: [
            'round',
            'Node CPU µs (workers + compactor)',
            'of it the compactor',
            'ms packing after the last step',
            'Redis CPU µs',
            'requests sent',
            'of which scripts',
            'Redis cmds (incl. in Lua)',
            'net bytes',
            'AOF bytes',
          ],
          rows: breakdown,
        },
        {
          title:
            'JIT warm-up before measuring (per cycle; measuring starts when worker CPU/step of the last two cycles agree within 15 %)',
          header: ['procs', 'kind', 'cycles', 'worker CPU µs/step', 'steps/s'],
          rows: Object.entries(warmups).flatMap(([p, w]) =>
            KINDS.map((k) => [
              p,
              k,
              w.cycles,
              (w.cpuHistory[k] ?? []).join(' -> ') + (w.stable ? '' : ' (not settled)'),
              (w.history[k] ?? []).join(' -> '),
            ]),
          ),
        },
      ],
    };
  },
};
