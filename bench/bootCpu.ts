/**
 * `node dist/bench/bootCpu.js [starts] [--role=worker|api|reconciler] [--redis=redis://127.0.0.1:6379]` (after `npm
 * run build`; default 6 starts of each, role worker): what a process of the fleet costs before it does its work,
 * started from its source through tsx (`npm run worker`'s way, and the suite's before `npm test` built dist/ for its
 * children) and from its compiled file (the image's). Each start is read at its start line (`worker_started`,
 * `api_listening`, `reconciler_started`): the process's CPU so far (user + system) and its resident memory
 * (/proc/<pid>/stat), and the time since its spawn; then it is SIGKILLed. The two ways alternate, one start at a time,
 * and the medians are printed. For finding what a process's start costs; not part of `npm run bench`.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { flag, positionals } from './lib/args.js';
import { median } from './lib/stats.js';
import { procStat } from './lib/processCpu.js';
import { onLines, projectRoot } from '../testkit/spawnModule.js';
import { deletePrefix, uniquePrefix } from '../testkit/keyPrefix.js';

const starts = Number(positionals()[0] ?? 6);
const redisUrl = flag('redis', process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const root = projectRoot();
const roles = { worker: 'worker_started', api: 'api_listening', reconciler: 'reconciler_started' } as const;
const role = flag('role', 'worker') as keyof typeof roles;
const startLine = roles[role];
if (!startLine) throw new Error(`--role=${role}: expected one of ${Object.keys(roles).join(', ')}`);
const ways = {
  sources: ['--import', 'tsx', join(root, `src/server/${role}.ts`)],
  compiled: [join(root, `dist/src/server/${role}.js`)],
};

interface Boot {
  cpuMs: number;
  wallMs: number;
  rssMb: number;
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
      RECONCILER_METRICS_PORT: '0',
      PORT: '0',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new Promise((resolve, reject) => {
    const stderr: string[] = [];
    child.stderr.on('data', (d: Buffer) => stderr.push(d.toString()));
    child.once('exit', (code) =>
      reject(new Error(`the ${role} exited (${code}) before its start line: ${stderr.join('')}`)),
    );
    onLines(child.stdout, (line) => {
      if (!line.includes(`"${startLine}"`)) return;
      const wallMs = performance.now() - started;
      const stat = procStat(child.pid!);
      const read = { cpuMs: stat.cpuSeconds * 1000, wallMs, rssMb: stat.residentBytes / 1e6 };
      child.removeAllListeners('exit');
      child.kill('SIGKILL');
      resolve(read);
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
  const rss = median(boots.map((b) => b.rssMb));
  console.log(
    `${role} ${way.padEnd(9)} CPU to the start line ${cpu.toFixed(0)} ms, time to it ${wall.toFixed(0)} ms, ` +
      `resident then ${rss.toFixed(0)} MB (median of ${boots.length})`,
  );
}
