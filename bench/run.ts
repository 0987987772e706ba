/**
 * `npm run bench [-- --quick] [-- --full-size] [-- --only=throughput,stepcost] [-- --rounds=5] [-- --cpu-prof[=dir]]`
 *
 * Starts its own Redis (embedded redis-server, AOF everysec) and sandbox, runs
 * the sections (bench/sections/index.ts), prints a table per section for
 * people and, as the very last line, one JSON object with every figure.
 * Everything it started is stopped at the end, also on error or Ctrl-C.
 * Exit code: 0 when every section ran (targets met or not), 1 otherwise.
 */
import { cpus, tmpdir } from 'node:os';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { installClientCounter } from './lib/clientCounter.js';
import { createBenchEnv, type OwnedEnv } from './lib/env.js';
import type { BenchOptions, SectionResult } from './lib/types.js';
import { printSection, printSummary } from './lib/report.js';
import { sections } from './sections/index.js';

installClientCounter();

function parseArgs(argv: string[]): BenchOptions & { only?: string[] } {
  const opts: BenchOptions & { only?: string[] } = { quick: false, rounds: 5 };
  let roundsSet = false;
  for (const a of argv) {
    if (a === '--quick') opts.quick = true;
    else if (a === '--full-size') opts.fullSize = true;
    else if (a.startsWith('--only='))
      opts.only = a
        .slice('--only='.length)
        .split(',')
        .map((s) => s.trim().toLowerCase())
        .filter(Boolean);
    else if (a.startsWith('--rounds=')) {
      opts.rounds = Math.max(1, Number(a.slice('--rounds='.length)) | 0);
      roundsSet = true;
    } else if (a === '--cpu-prof' || a.startsWith('--cpu-prof=')) {
      opts.cpuProfDir = a.includes('=') ? a.slice('--cpu-prof='.length) : join(tmpdir(), `bench-cpuprof-${Date.now()}`);
    } else if (a === '--help' || a === '-h') {
      console.log(
        `usage: npm run bench -- [--quick] [--full-size] [--only=${sections.map((s) => s.name).join(',')}] [--rounds=N] [--cpu-prof[=dir]]`,
      );
      process.exit(0);
    } else {
      console.error(`unknown argument: ${a}`);
      process.exit(2);
    }
  }
  if (opts.quick && !roundsSet) opts.rounds = 1;
  return opts;
}

const opts = parseArgs(process.argv.slice(2));
const selected = opts.only ? sections.filter((s) => opts.only!.includes(s.name)) : sections;
if (opts.only) {
  const unknown = opts.only.filter((n) => !sections.some((s) => s.name === n));
  if (unknown.length > 0) {
    console.error(`unknown section(s): ${unknown.join(', ')}; known: ${sections.map((s) => s.name).join(', ')}`);
    process.exit(2);
  }
}
if (opts.cpuProfDir) mkdirSync(opts.cpuProfDir, { recursive: true });

const startedAt = new Date();
const t0 = performance.now();
let env: OwnedEnv | undefined;
const results: SectionResult[] = [];
let fatal: string | undefined;

async function stopAll(): Promise<void> {
  if (env) await env.cleanup();
}

let interrupted = false;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    interrupted = true;
    console.error(`\n[bench] ${sig}: stopping everything the bench started`);
    void stopAll().finally(() => process.exit(sig === 'SIGINT' ? 130 : 143));
  });
}

try {
  env = await createBenchEnv(opts);
  const version = ((await env.admin.info('server')).match(/redis_version:(\S+)/) ?? [])[1];
  console.log(
    `bench: ${opts.quick ? 'quick' : opts.fullSize ? 'full size' : 'full'}, rounds ${opts.rounds}, sections ${selected.map((s) => s.name).join(', ')}; ` +
      `redis ${version} (embedded, ${env.redis.url}, AOF everysec), node ${process.version}, ${cpus().length} cpus` +
      (opts.cpuProfDir ? `; worker CPU profiles -> ${opts.cpuProfDir}` : ''),
  );
  for (const section of selected) {
    if (interrupted) break;
    const s0 = performance.now();
    process.stdout.write(`\n... ${section.name}\n`);
    let result: SectionResult;
    try {
      result = await section.run(env, opts);
    } catch (e) {
      result = { name: section.name, title: section.title, metrics: [], error: (e as Error).stack ?? String(e) };
    }
    result.durationMs = Math.round(performance.now() - s0);
    if (interrupted) break;
    results.push(result);
    printSection(result);
  }
} catch (e) {
  fatal = (e as Error).stack ?? String(e);
  console.error(`[bench] ${fatal}`);
} finally {
  await stopAll();
}

const summary = printSummary(results);
const out = {
  bench: 'durable-agent-fleet',
  startedAt: startedAt.toISOString(),
  durationMs: Math.round(performance.now() - t0),
  quick: opts.quick,
  fullSize: opts.fullSize === true,
  rounds: opts.rounds,
  host: { node: process.version, cpus: cpus().length, platform: process.platform },
  ...(opts.cpuProfDir ? { cpuProfDir: opts.cpuProfDir } : {}),
  targets: summary,
  ...(fatal ? { error: fatal } : {}),
  sections: Object.fromEntries(
    results.map((r) => [
      r.name,
      {
        title: r.title,
        durationMs: r.durationMs,
        ...(r.error ? { error: r.error } : {}),
        metrics: Object.fromEntries(
          r.metrics.map((m) => [
            m.key,
            {
              value: m.value,
              unit: m.unit,
              ...(m.target ? { target: m.target, met: m.met } : {}),
            },
          ]),
        ),
        ...(r.details ? { details: r.details } : {}),
      },
    ]),
  ),
};
const code = fatal || results.some((r) => r.error) ? 1 : 0;
process.stdout.write(`${JSON.stringify(out)}\n`, () => process.exit(code));
