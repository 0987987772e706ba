/**
 * `node dist/bench/gcTrace.js [engine|plain|effects] [rounds] [--procs=1] [--chains=100] [--steps=40]`, after `npm run
 * build` (default engine, 6 rounds): what a kind of step leaves to the worker's garbage collector. `procs` worker
 * children run 4 warm-up rounds and then the measured ones (`chains` runs of `steps` steps, concurrency 20 each) with
 * V8's `--trace-gc-nvp`; this process reads V8's line for every young-generation collection (scavenge) and full
 * collection of the measured rounds and prints, per step: the bytes that were still reachable at a scavenge (copied,
 * so paid for) and the bytes promoted to the old generation, the scavenges' pause on the main thread and their time
 * on V8's helper threads (both count in the worker's CPU), and the full collections' pause.
 *
 * A step's garbage is cheap while it dies young: a scavenge costs what survives it, not what was allocated. For
 * finding why it does not; not part of `npm run bench`.
 *
 * The measuring runs in a child of this process (`GC_TRACE_CHILD`), whose worker children share its output: V8
 * writes its trace to the process's stdout, which this process reads.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { createBenchEnv } from './lib/env.js';
import { runRound, type RoundKind } from './lib/workload.js';
import { GcTotals } from './lib/gcTrace.js';
import { flag, positionals } from './lib/args.js';

const MEASURE_START = 'gc-trace: measuring';
const MEASURE_END = 'gc-trace: measured steps';
const WARM_UP = 4;

const [kindArg, roundsArg] = positionals();
const kind = (kindArg ?? 'engine') as RoundKind;
const rounds = Number(roundsArg ?? 6);
const procs = Number(flag('procs', '1'));
const chains = Number(flag('chains', '100'));
const steps = Number(flag('steps', '40'));

if (process.env.GC_TRACE_CHILD) await measure();
else await report();

/** In the child: warm-up and measured rounds on one worker child tracing its collections. */
async function measure(): Promise<void> {
  const env = await createBenchEnv({ quick: false, rounds, workerNodeFlags: ['--trace-gc-nvp'] });
  try {
    const pool = await env.spawnPool(procs);
    for (let r = 0; r < WARM_UP; r++) await runRound(env, pool, { kind, chains, steps, tag: `w${r}` });
    console.log(MEASURE_START);
    let measured = 0;
    for (let r = 0; r < rounds; r++)
      measured += (await runRound(env, pool, { kind, chains, steps, tag: `m${r}` })).jobs;
    console.log(`${MEASURE_END} ${measured}`);
    await pool.kill();
  } finally {
    await env.cleanup();
  }
}

/** In this process: runs the child and sums V8's lines between its markers. */
async function report(): Promise<void> {
  const child = spawn(
    process.execPath,
    [
      fileURLToPath(import.meta.url),
      kind,
      String(rounds),
      `--procs=${procs}`,
      `--chains=${chains}`,
      `--steps=${steps}`,
    ],
    {
      env: { ...process.env, GC_TRACE_CHILD: '1' },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const t = new GcTotals();
  let measuring = false;
  let measured = 0;
  for await (const line of createInterface({ input: child.stdout })) {
    if (line === MEASURE_START) measuring = true;
    else if (line.startsWith(MEASURE_END)) {
      measured = Number(line.slice(MEASURE_END.length));
      measuring = false;
    } else if (measuring) t.add(line);
  }
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  if (code !== 0 || measured === 0) throw new Error(`the measuring child failed (exit ${code})`);
  const kb = (bytes: number) => (bytes / 1024 / measured).toFixed(2);
  const us = (ms: number) => ((ms * 1000) / measured).toFixed(1);
  console.log(`${kind}: ${measured} steps, ${t.scavenges} scavenges, ${t.fullCollections} full collections`);
  console.log(`survived a scavenge: ${kb(t.survived)} KB/step, promoted: ${kb(t.promoted)} KB/step`);
  console.log(
    `scavenges: ${us(t.scavengeMs)} µs/step on the main thread + ${us(t.helperMs)} µs/step on helper threads; ` +
      `full collections: ${us(t.fullMs)} µs/step`,
  );
}
