/**
 * Section "overhead": what durability costs per step, in ms, over the plain
 * chain. Step latency = BullMQ 'active' -> 'completed' in the worker (the
 * processor plus BullMQ's completion round trip), measured with the
 * high-resolution clock. Two loads:
 *   - unloaded: one chain alone (pure per-step latency, no queueing);
 *   - loaded: the throughput workload (many chains, concurrency 20, 1 process).
 */
import { type BenchEnv, type BenchOptions, type Metric, type Section, type SectionResult } from '../lib/types.js';
import { dist, round, type Dist } from '../lib/stats.js';
import { runRound, warmUp, type RoundKind, type WarmUpResult } from '../lib/workload.js';

export const overhead: Section = {
  name: 'overhead',
  title: 'Durability overhead per step over the plain chain (latency active -> completed, 1 worker process)',
  async run(env: BenchEnv, opts: BenchOptions): Promise<SectionResult> {
    const serialSteps = opts.quick ? 100 : 300;
    const loaded = opts.quick ? { chains: 20, steps: 20 } : { chains: 50, steps: 40 };
    const rounds = Math.max(1, opts.rounds);
    const pool = await env.spawnPool(1);
    const lat: Record<string, Record<'plain' | 'engine', number[]>> = {
      unloaded: { plain: [], engine: [] },
      loaded: { plain: [], engine: [] },
    };
    const periods: Record<'plain' | 'engine', number[]> = { plain: [], engine: [] };
    let warm: WarmUpResult | undefined;
    try {
      warm = await warmUp(env, pool, ['plain', 'engine'], loaded, {
        minCycles: opts.quick ? 2 : 3,
        maxCycles: opts.quick ? 3 : 8,
        tag: 'ow',
      });
      for (const kind of ['plain', 'engine'] as RoundKind[])
        await runRound(env, pool, { kind, chains: 1, steps: 50, tag: 'ow1', recordLatency: true });
      for (let r = 0; r < rounds; r++) {
        const order: ('plain' | 'engine')[] = r % 2 === 0 ? ['plain', 'engine'] : ['engine', 'plain'];
        for (const kind of order) {
          const s = await runRound(env, pool, {
            kind,
            chains: 1,
            steps: serialSteps,
            tag: `os${r}`,
            recordLatency: true,
          });
          lat.unloaded![kind].push(...s.latencies);
          periods[kind].push(...s.periods);
          const l = await runRound(env, pool, { kind, ...loaded, tag: `ol${r}`, recordLatency: true });
          lat.loaded![kind].push(...l.latencies);
        }
      }
    } finally {
      await pool.kill();
    }
    const metrics: Metric[] = [];
    const rows: (string | number)[][] = [];
    const details: Record<string, unknown> = { serialSteps, loaded, rounds, warmUp: warm };
    for (const load of ['unloaded', 'loaded'] as const) {
      const p = dist(lat[load]!.plain);
      const e = dist(lat[load]!.engine);
      const label = load === 'unloaded' ? 'one chain alone' : `${loaded.chains} chains, conc 20`;
      metrics.push(
        {
          key: `${load}_overhead_p50_ms`,
          label: `overhead p50, ${label}`,
          value: round(e.p50 - p.p50, 3),
          unit: 'ms',
          note: `engine ${round(e.p50, 3)} vs plain ${round(p.p50, 3)}`,
        },
        {
          key: `${load}_overhead_p99_ms`,
          label: `overhead p99, ${label}`,
          value: round(e.p99 - p.p99, 3),
          unit: 'ms',
          note: `engine ${round(e.p99, 3)} vs plain ${round(p.p99, 3)}`,
        },
      );
      rows.push(distRow(`plain, ${label}`, p), distRow(`engine, ${label}`, e));
      details[load] = { plain: roundDist(p), engine: roundDist(e) };
    }
    const pp = dist(periods.plain);
    const ep = dist(periods.engine);
    rows.push(
      distRow('plain, one chain: completion-to-completion', pp),
      distRow('engine, one chain: completion-to-completion', ep),
    );
    details.periods = { plain: roundDist(pp), engine: roundDist(ep) };
    return {
      name: this.name,
      title: this.title,
      metrics,
      details,
      tables: [
        {
          title: 'Per-step latency distributions (ms)',
          header: ['series', 'n', 'mean', 'p50', 'p90', 'p99', 'max'],
          rows,
        },
      ],
    };
  },
};

function distRow(name: string, d: Dist): (string | number)[] {
  return [name, d.n, round(d.mean, 3), round(d.p50, 3), round(d.p90, 3), round(d.p99, 3), round(d.max, 2)];
}

function roundDist(d: Dist): Dist {
  return {
    n: d.n,
    mean: round(d.mean, 3),
    p50: round(d.p50, 3),
    p90: round(d.p90, 3),
    p99: round(d.p99, 3),
    max: round(d.max, 3),
  };
}
