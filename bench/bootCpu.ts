/**
 * `node dist/bench/bootCpu.js [starts] [--redis=redis://127.0.0.1:6379]` (after `npm run build`; default 6 starts of
 * each): what a worker process costs before its first job, started from its source through tsx (`npm run worker`'s
 * way, and the suite's before `npm test` built dist/ for its children) and from its compiled file (the image's). Each
 * start is read at the worker's `worker_started` line: the process's CPU so far (user + system, /proc/<pid>/stat) and
 * the time since its spawn; then it is SIGKILLed. The two ways alternate, one start at a time, and the medians are
 * printed. For finding what the suite's process starts cost; not part of `npm run bench`.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { flag, positionals } from './lib/args.js';
import { median } from './lib/stats.js';
import { cpuSeconds } from './lib/processCpu.js';
import { onLines, projectRoot } from '../testkit/spawnModule.js';
import { deletePrefix, uniquePrefix } from '../testkit/keyPrefix.js';

const starts = Number(positionals()[0] ?? 6);
const redisUrl = flag('redis', process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const root = projectRoot();
const ways = {
  sources: ['--import', 'tsx', join(root, 'src/server/worker.ts')],
  compiled: [join(root, 'dist/src/server/worker.js')],
};

interface Boot {
  cpuMs: number;
  wallMs: number;
}

function boot(args: string[], prefix: string): Promise<Boot> {
  const started = performance.now();
  const child = spawn(process.execPath, args, {
    cwd: root,
    env: {
      ...process.env,
      REDIS_URL: redisUrl,
      KEY_PREFIX: prefix,
      BULL_PREFIX: `${prefix}b`,
      WORKER_METRICS_PORT: '0',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new Promise((resolve, reject) => {
    const stderr: string[] = [];
    child.stderr.on('data', (d: Buffer) => stderr.push(d.toString()));
    child.once('exit', (code) =>
      reject(new Error(`the worker exited (${code}) before its start line: ${stderr.join('')}`)),
    );
    onLines(child.stdout, (line) => {
      if (!line.includes('"worker_started"')) return;
      const wallMs = performance.now() - started;
      child.removeAllListeners('exit');
      child.kill('SIGKILL');
      resolve({ cpuMs: cpuSeconds(child.pid!) * 1000, wallMs });
    });
  });
}

const prefix = uniquePrefix('bootcpu');
const seen: Record<keyof typeof ways, Boot[]> = { sources: [], compiled: [] };
for (let i = 0; i < starts; i++) {
  for (const way of Object.keys(ways) as (keyof typeof ways)[]) seen[way].push(await boot(ways[way], prefix));
}
const redis = new Redis(redisUrl);
await deletePrefix(redis, prefix);
await deletePrefix(redis, `${prefix}b`);
redis.disconnect();
for (const [way, boots] of Object.entries(seen)) {
  const cpu = median(boots.map((b) => b.cpuMs));
  const wall = median(boots.map((b) => b.wallMs));
  console.log(
    `${way.padEnd(9)} CPU to the start line ${cpu.toFixed(0)} ms, time to it ${wall.toFixed(0)} ms (median of ${boots.length})`,
  );
}
