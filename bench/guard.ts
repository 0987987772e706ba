/**
 * The cost-per-step regression guard: `npm run bench:guard` runs the throughput section and compares what a step
 * costs against the figures recorded in bench/baseline.json, failing (exit 1) with a table of what grew past its
 * tolerance; `npm run bench:guard -- --record` writes the figures of this tree as the new baseline.
 *
 * Two kinds of figure, guarded differently:
 *  - counts: Redis commands sent and executed (inside Lua too) and AOF bytes per step. They do not depend on the
 *    machine's speed or load, so a small tolerance catches a feature that adds a round trip or a write to every step.
 *  - CPU per step, as a ratio to the plain BullMQ chain measured in the same rounds (worker and Redis CPU): a ratio
 *    cancels most of the machine's speed and load, not all of it, so its tolerance is wider. Absolute microseconds
 *    are recorded for people and never compared.
 *  - the bytes of a read-only step still reachable at a young-generation collection (bench/gcTrace.ts, `gc` in the
 *    baseline): a step's garbage costs the worker what survives, so a change that keeps a step's objects alive past
 *    the step (it happened once: 3.5 KB a step, most of the worker's GC time) is seen here before it is seen in CPU.
 *  - the Redis instructions of a read-only step as a ratio to the plain chain's (bench/redisCost.ts under valgrind,
 *    20 runs x 20 steps, `redis` in the baseline): exact, whatever the machine is doing, so a change to a script that
 *    costs the server 2 % more fails here although no CPU figure could show it.
 *
 * `--record` keeps, for each figure measured by time (NOISY), the lower of the recorded value and this reading's: one
 * slow reading would otherwise widen what the guard lets through from then on. A change meant to cost more records
 * with `--record=raise`, which writes this reading's figures as they are.
 *
 * Usage: npm run bench:guard -- [--record[=raise]] [--rounds=N] [--quick] [--from=bench-output.json] (read a saved
 * `npm run bench` output instead of running one) [--skip-instructions] (a machine without valgrind).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const BASELINE = join(dirname(fileURLToPath(import.meta.url)), 'baseline.json');
const KINDS = ['engine', 'effects'] as const;
const PROCS = ['1p', '2p'] as const;

/** What each guarded figure may grow by before the guard fails. */
export const TOLERANCE = {
  clientCmdsPerStep: 0.03,
  redisCallsPerStep: 0.03,
  aofBytesPerStep: 0.05,
  cpuRatio: 0.25,
  survivedKbPerStep: 0.5,
  redisInstrRatio: 0.02,
} as const;
type Figure = keyof typeof TOLERANCE;
/** The guarded figures read from time, which a loaded machine inflates; the rest are counts, exact on any machine. */
const NOISY: ReadonlySet<Figure> = new Set(['cpuRatio']);

interface RoundFigures {
  nodeCpuUsPerStep: number;
  redisCpuUsPerStep: number;
  clientCmdsPerStep: number;
  redisCallsPerStep: number;
  aofBytesPerStep: number;
}
type Details = Record<string, unknown>;

/** Per procs and kind: the guarded figures (medians over the rounds) and the absolute CPU for people. */
export type Figures = Record<string, Record<string, Partial<Record<Figure | 'workerCpuUs' | 'redisCpuUs', number>>>>;

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const r3 = (x: number) => Math.round(x * 1000) / 1000;

/** The guarded figures of one throughput section's details. */
export function figuresOf(details: Details): Figures {
  const out: Figures = {};
  for (const p of PROCS) {
    const rounds = details[p] as Record<string, RoundFigures[]> | undefined;
    if (!rounds?.plain?.length) throw new Error(`the throughput output has no rounds for ${p}`);
    const cpu = (xs: RoundFigures[]) => median(xs.map((x) => x.nodeCpuUsPerStep + x.redisCpuUsPerStep));
    out[p] = {};
    for (const k of KINDS) {
      const xs = rounds[k]!;
      out[p][k] = {
        clientCmdsPerStep: r3(median(xs.map((x) => x.clientCmdsPerStep))),
        redisCallsPerStep: r3(median(xs.map((x) => x.redisCallsPerStep))),
        aofBytesPerStep: r3(median(xs.map((x) => x.aofBytesPerStep))),
        cpuRatio: r3(cpu(xs) / cpu(rounds.plain)),
        workerCpuUs: r3(median(xs.map((x) => x.nodeCpuUsPerStep))),
        redisCpuUs: r3(median(xs.map((x) => x.redisCpuUsPerStep))),
      };
    }
  }
  return out;
}

export interface Regression {
  where: string;
  figure: Figure;
  baseline: number;
  now: number;
  limit: number;
}

/** Every guarded figure that grew past its tolerance (a figure that shrank is an improvement: record it). */
export function compare(baseline: Figures, now: Figures): Regression[] {
  const found: Regression[] = [];
  for (const [p, kinds] of Object.entries(baseline))
    for (const [k, figures] of Object.entries(kinds))
      for (const figure of Object.keys(TOLERANCE) as Figure[]) {
        const base = figures[figure];
        const value = now[p]?.[k]?.[figure];
        if (base === undefined || value === undefined) continue;
        const limit = r3(base * (1 + TOLERANCE[figure]));
        if (value > limit) found.push({ where: `${k} ${p}`, figure, baseline: base, now: value, limit });
      }
  return found;
}

/** A NOISY figure `--record` left at its recorded value, lower than this reading's. */
export interface KeptFigure {
  where: string;
  figure: Figure;
  kept: number;
  reading: number;
}

/**
 * The figures `--record` writes: this reading's, except that a NOISY figure keeps the recorded value where that is
 * lower (unless `raise`), each such one listed in `kept`. Figures only one side has are taken from the side that has
 * them.
 */
export function recordedFigures(
  previous: Figures,
  now: Figures,
  raise: boolean,
): { figures: Figures; kept: KeptFigure[] } {
  const figures: Figures = structuredClone(now);
  const kept: KeptFigure[] = [];
  if (raise) return { figures, kept };
  for (const [p, kinds] of Object.entries(figures))
    for (const [k, read] of Object.entries(kinds))
      for (const figure of NOISY) {
        const before = previous[p]?.[k]?.[figure];
        const reading = read[figure];
        if (before === undefined || reading === undefined || before >= reading) continue;
        read[figure] = before;
        kept.push({ where: `${k} ${p}`, figure, kept: before, reading });
      }
  return { figures, kept };
}

/** The figures bench/baseline.json holds; none when there is no baseline yet (a first `--record`). */
function baselineFigures(): Figures | undefined {
  if (!existsSync(BASELINE)) return undefined;
  return (JSON.parse(readFileSync(BASELINE, 'utf8')) as { figures: Figures }).figures;
}

function benchOutput(args: string[]): { details: Details; rounds: number; node: string } {
  const from = args.find((a) => a.startsWith('--from='))?.slice('--from='.length);
  const rounds = args.find((a) => a.startsWith('--rounds=')) ?? '--rounds=3';
  const text = from
    ? readFileSync(from, 'utf8')
    : // The compiled bench (`npm run bench:guard` builds dist/ first): the code as it ships, not tsx's transform of it.
      spawnSync(
        process.execPath,
        ['dist/bench/run.js', '--only=throughput', rounds, ...args.filter((a) => a === '--quick')],
        {
          encoding: 'utf8',
          stdio: ['ignore', 'pipe', 'inherit'],
          maxBuffer: 64 * 1024 * 1024,
        },
      ).stdout;
  const last = text.trim().split('\n').at(-1) ?? '';
  const out = JSON.parse(last) as {
    rounds: number;
    host: { node: string };
    sections: { throughput?: { details?: Details; error?: string } };
  };
  const section = out.sections.throughput;
  if (!section?.details) throw new Error(`the bench did not measure throughput: ${section?.error ?? 'no output'}`);
  return { details: section.details, rounds: out.rounds, node: out.host.node };
}

/** What a read-only step leaves to the young generation (bench/gcTrace.ts, one worker child, 4 measured rounds). */
function gcFigures(): Figures {
  const text = spawnSync(process.execPath, ['dist/bench/gcTrace.js', 'engine', '4'], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).stdout;
  const survived = /survived a scavenge: ([\d.]+) KB\/step/.exec(text)?.[1];
  if (survived === undefined) throw new Error(`gcTrace printed no survivors: ${text.slice(0, 300)}`);
  return { gc: { engine: { survivedKbPerStep: Number(survived) } } };
}

/** Redis instructions per read-only step, engine / plain (bench/redisCost.ts: one traced round each, replayed). */
function redisFigures(): Figures {
  if (spawnSync('valgrind', ['--version'], { stdio: 'ignore' }).status !== 0)
    throw new Error('valgrind is not on PATH (apt-get install valgrind), or pass --skip-instructions');
  const text = spawnSync(process.execPath, ['dist/bench/redisCost.js', '--chains=20', '--steps=20'], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).stdout;
  const ratio = /^\s+engine\s+[\d,]+ instr\/step\s+x([\d.]+) plain/m.exec(text)?.[1];
  if (ratio === undefined) throw new Error(`redisCost printed no engine figure: ${text.slice(0, 300)}`);
  return { redis: { engine: { redisInstrRatio: Number(ratio) } } };
}

function main(args: string[]): number {
  const { details, rounds, node } = benchOutput(args);
  const now = {
    ...figuresOf(details),
    ...gcFigures(),
    ...(args.includes('--skip-instructions') ? {} : redisFigures()),
  };
  const record = args.find((a) => a === '--record' || a.startsWith('--record='));
  if (record) {
    const raise = record === '--record=raise';
    if (!raise && record !== '--record') throw new Error(`${record}: expected --record or --record=raise`);
    const { figures, kept } = recordedFigures(baselineFigures() ?? {}, now, raise);
    writeFileSync(
      BASELINE,
      `${JSON.stringify({ recorded: new Date().toISOString().slice(0, 10), node, rounds, tolerance: TOLERANCE, figures }, null, 2)}\n`,
    );
    for (const f of kept)
      console.log(`bench:guard: ${f.where} ${f.figure} kept at ${f.kept} (this reading ${f.reading})`);
    console.log(`bench:guard: recorded ${BASELINE}`);
    return 0;
  }
  const baseline = baselineFigures();
  if (!baseline) throw new Error(`${BASELINE} does not exist: record one with --record`);
  const regressions = compare(baseline, now);
  for (const p of PROCS)
    for (const k of KINDS)
      console.log(`${k} ${p}: ${JSON.stringify(now[p]![k])} (baseline ${JSON.stringify(baseline[p]?.[k])})`);
  console.log(`engine gc: ${JSON.stringify(now.gc?.engine)} (baseline ${JSON.stringify(baseline.gc?.engine)})`);
  const redis = now.redis?.engine;
  console.log(
    redis
      ? `engine redis: ${JSON.stringify(redis)} (baseline ${JSON.stringify(baseline.redis?.engine)})`
      : 'engine redis: not measured (--skip-instructions)',
  );
  if (regressions.length === 0) {
    console.log('bench:guard: every figure within its tolerance');
    return 0;
  }
  for (const r of regressions)
    console.log(`bench:guard: ${r.where} ${r.figure} ${r.now} > ${r.limit} (baseline ${r.baseline})`);
  return 1;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1])
  process.exitCode = main(process.argv.slice(2));
