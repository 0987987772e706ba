/**
 * `npx tsx bench/profile.ts [engine|plain|effects] [rounds] [outDir]` (PROFILE_SKIP=0.4: ignore the first 40 %,
 * the JIT warm-up): runs only
 * rounds of one kind on one worker child started with --cpu-prof, then prints
 * the profile's top functions and packages by self time (bench/lib/cpuprof.ts).
 * For finding where a step's time goes; not part of `npm run bench`.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { createBenchEnv } from './lib/env.js';
import { runRound, type RoundKind } from './lib/workload.js';
import { summarizeProfile } from './lib/cpuprof.js';
import { installClientCounter } from './lib/clientCounter.js';

installClientCounter();
const kind = (process.argv[2] ?? 'engine') as RoundKind;
const rounds = Number(process.argv[3] ?? 5);
const dir = process.argv[4] ?? join(tmpdir(), `bench-profile-${kind}-${Date.now()}`);
const env = await createBenchEnv({ quick: false, rounds, cpuProfDir: dir });
try {
  console.log(`embedded redis pid ${env.redis.process?.pid} at ${env.redis.url}`);
  const pool = await env.spawnPool(1);
  for (let r = 0; r < rounds; r++) {
    const res = await runRound(env, pool, { kind, chains: 50, steps: 40, tag: `prof${r}` });
    console.log(
      `${kind} round ${r}: ${Math.round(res.stepsPerSec)} steps/s, worker CPU ${res.nodeCpuUsPerStep.toFixed(0)} µs/step`,
    );
  }
  await pool.kill();
} finally {
  await env.cleanup();
}
const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
for (const f of files) {
  console.log(`\n${join(dir, f)}`);
  console.log(summarizeProfile(join(dir, f), 40, Number(process.env.PROFILE_SKIP ?? 0.4)));
}
