/**
 * `node dist/bench/profile.js [engine|plain|effects] [rounds] [outDir] [--alloc] [--procs=1]`, after `npm run build`
 * (PROFILE_SKIP=0.4: ignore the first 40 %, the JIT warm-up): runs only rounds of one kind on `procs` worker children
 * (50 chains each) and prints where a step's work goes, one profile per child.
 *  - default: the child runs with --cpu-prof; the profile's top functions and packages by self time
 *    (bench/lib/cpuprof.ts).
 *  - `--alloc`: the child samples its allocations round by round instead; bytes allocated per step by function and
 *    by nearest project frame over the rounds past the warm-up (bench/lib/heapprof.ts).
 * For finding where a step's time goes; not part of `npm run bench`.
 */
import { mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { createBenchEnv } from './lib/env.js';
import { runRound, type RoundKind } from './lib/workload.js';
import { summarizeProfile } from './lib/cpuprof.js';
import { summarizeAllocations } from './lib/heapprof.js';
import { installClientCounter } from './lib/clientCounter.js';
import { flag, positionals } from './lib/args.js';

installClientCounter();
const alloc = process.argv.includes('--alloc');
const [kindArg, roundsArg, dirArg] = positionals();
const kind = (kindArg ?? 'engine') as RoundKind;
const rounds = Number(roundsArg ?? 5);
const procs = Number(flag('procs', '1'));
const skip = Number(process.env.PROFILE_SKIP ?? 0.4);
const dir = dirArg ?? join(tmpdir(), `bench-${alloc ? 'alloc' : 'profile'}-${kind}-${Date.now()}`);
mkdirSync(dir, { recursive: true });
const env = await createBenchEnv({ quick: false, rounds, ...(alloc ? { allocProfDir: dir } : { cpuProfDir: dir }) });
try {
  console.log(`embedded redis pid ${env.redis.process?.pid} at ${env.redis.url}`);
  const pool = await env.spawnPool(procs);
  for (let r = 0; r < rounds; r++) {
    const res = await runRound(env, pool, { kind, chains: 50 * procs, steps: 40, tag: `prof${r}` });
    console.log(
      `${kind} round ${r}: ${Math.round(res.stepsPerSec)} steps/s, worker CPU ${res.nodeCpuUsPerStep.toFixed(0)} µs/step`,
    );
  }
  await pool.kill();
} finally {
  await env.cleanup();
}
if (alloc) {
  // One file per round, in order: the warm-up's rounds are left out as a whole.
  const files = readdirSync(dir)
    .filter((f) => f.startsWith('alloc-'))
    .sort();
  const measured = files.slice(Math.floor(files.length * skip)).map((f) => join(dir, f));
  console.log(`\n${dir}`);
  console.log(summarizeAllocations(measured, 40));
} else {
  const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
  for (const f of files) {
    console.log(`\n${join(dir, f)}`);
    console.log(summarizeProfile(join(dir, f), 40, skip));
  }
}
