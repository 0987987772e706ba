/**
 * Section "memory": what a run costs in Redis memory, how much memory a worker
 * process holds under load, and whether retention (RUN_RETENTION_MS) removes a
 * finished run's keys.
 *
 *  1. Worker RSS: VmRSS of every worker child process (/proc/<pid>/status),
 *     idle and sampled every 100 ms during load rounds (read-only engine chains,
 *     then chains with one ledger email per run).
 *  2. Bytes per completed run: N built-in support-agent runs (5 steps: reads,
 *     a ticket and an email through the ledger), then `MEMORY USAGE <key>
 *     SAMPLES 0` of every key, grouped by what it is, divided by N; and the
 *     INFO used_memory delta over the N runs; and the bytes Redis appended to
 *     its AOF over those runs, by the family of each persisted command's key.
 *  3. Retention: the same runs on workers with a short RUN_RETENTION_MS; bytes
 *     of the runs' keys right after they finish (each key carrying a TTL) and
 *     again once the retention has elapsed.
 */
import { buildSpec } from '../../src/producer/intake.js';
import type { Redis } from 'ioredis';
import { WorkerPool } from '../lib/pool.js';
import { mean, round } from '../lib/stats.js';
import {
  atMost,
  type BenchEnv,
  type BenchOptions,
  type Metric,
  type Section,
  type SectionResult,
} from '../lib/types.js';
import { runRound, TENANT, ticket } from '../lib/workload.js';
import { supportScript } from '../../src/agents/support/scriptedModel.js';
import { aofBytesByFamily, aofMark } from '../lib/aofFamilies.js';
import { COMPLETED_WINDOW } from '../../src/store/queues.js';

/** The built-in agent's scripted run (its demo script, one step per turn): each run's step jobs. */
const SUPPORT_STEPS = supportScript(ticket('steps')).length;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What a key is, from its name (src/store/keys.ts layout; BullMQ's under the bull prefix). */
export function keyCategory(key: string, prefix: string, bullPrefix: string): string {
  if (key.startsWith(`${bullPrefix}:`)) {
    const rest = key.slice(bullPrefix.length + 1).replace(/^[^:]+:/, ''); // drop the queue name
    if (/^r_[0-9a-f]+\.s\d+$/.test(rest)) return 'bull: step job hashes';
    if (/^r_[0-9a-f]+\.s\d+:/.test(rest)) return 'bull: step job sub-keys (lock, logs)';
    return `bull: queue ${rest}`;
  }
  if (new RegExp(`^${prefix}:\\{\\d+\\}:idem:`).test(key)) return 'ledger idempotency reservations';
  const m = new RegExp(`^${prefix}:\\{\\d+\\}:(run|action):[^:]+(?::([\\w-]+))?$`).exec(key);
  if (m) {
    const [, kind, sub] = m;
    if (kind === 'run') return sub ? `run ${sub}` : 'run hash';
    return sub ? `ledger ${sub}` : 'ledger records';
  }
  const byIndex = new RegExp(`^${prefix}:\\{\\d+\\}:(runs-by|subject):`).exec(key);
  if (byIndex) return byIndex[1] === 'subject' ? 'subject latest run' : 'index runs-by';
  const shared = new RegExp(`^${prefix}:\\{\\d+\\}:([\\w-]+)$`).exec(key);
  if (shared) return `index ${shared[1]}`;
  return key.startsWith(`${prefix}:`) ? `other ${key.slice(prefix.length + 1).split(':')[0]}` : 'other';
}

export interface KeyReport {
  keys: number;
  bytes: number;
  byCategory: Map<string, { keys: number; bytes: number; withTtl: number }>;
}

/** MEMORY USAGE (all samples) and PTTL of every key, grouped by category. */
export async function measureKeys(admin: Redis, prefix: string, bullPrefix: string): Promise<KeyReport> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await admin.scan(cursor, 'COUNT', 1000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== '0');
  const report: KeyReport = { keys: 0, bytes: 0, byCategory: new Map() };
  for (let i = 0; i < keys.length; i += 500) {
    const slice = keys.slice(i, i + 500);
    const pipe = admin.pipeline();
    for (const k of slice) {
      pipe.call('MEMORY', 'USAGE', k, 'SAMPLES', '0');
      pipe.pttl(k);
    }
    const res = (await pipe.exec()) ?? [];
    slice.forEach((k, j) => {
      const bytes = Number(res[2 * j]?.[1] ?? 0);
      const ttl = Number(res[2 * j + 1]?.[1] ?? -2);
      if (ttl === -2) return; // expired between SCAN and MEMORY USAGE
      const cat = keyCategory(k, prefix, bullPrefix);
      const c = report.byCategory.get(cat) ?? { keys: 0, bytes: 0, withTtl: 0 };
      c.keys++;
      c.bytes += bytes;
      if (ttl > 0) c.withTtl++;
      report.byCategory.set(cat, c);
      report.keys++;
      report.bytes += bytes;
    });
  }
  return report;
}

const usedMemory = async (admin: Redis) => Number(/used_memory:(\d+)/.exec(await admin.info('memory'))?.[1] ?? 0);

async function rssKb(pid: number): Promise<number> {
  const { readFile } = await import('node:fs/promises');
  try {
    return Number(/VmRSS:\s+(\d+) kB/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);
  } catch {
    return Number.NaN;
  }
}

/** Creates `n` support-agent runs, lets the pool finish them, checks they completed. */
export async function completeSupportRuns(env: BenchEnv, pool: WorkerPool, n: number, tag: string): Promise<string[]> {
  const runIds: string[] = [];
  for (let i = 0; i < n; i++) {
    const t = ticket(`${tag}-${i}`);
    const spec = buildSpec(
      env.ctx,
      { tenant: TENANT, ticket: { ...t, customer: { ...t.customer, email: `m${i}-${tag}@example.com` } } },
      Date.now(),
    );
    if (!(await env.ctx.store.create(spec, Date.now()))) throw new Error(`run ${tag}-${i} already existed`);
    runIds.push(spec.runId);
  }
  await pool.prepare({ kind: 'engine', queueName: 'unused', recordLatency: false });
  await pool.go();
  try {
    await pool.waitFor(n * SUPPORT_STEPS, 120_000);
  } finally {
    const stats = await pool.finish().catch(() => []);
    const failed = stats.flatMap((s) => s.failures);
    if (failed.length) throw new Error(`support runs: jobs failed: ${failed.join('; ')}`);
  }
  const statuses = await Promise.all(runIds.map((id) => env.ctx.redis.hget(env.ctx.keys.run(id).run, 'status')));
  const bad = statuses.filter((s) => s !== 'completed');
  if (bad.length)
    throw new Error(`${bad.length} of ${n} support runs did not complete (${[...new Set(bad)].join(', ')})`);
  return runIds;
}

const RUN_CATEGORIES = [
  'run hash',
  'run budget',
  'run journal',
  'run events',
  'run actions',
  'ledger records',
  'ledger history',
  'ledger idempotency reservations',
];

export const memory: Section = {
  name: 'memory',
  title: 'Memory: Redis bytes per completed run, worker RSS under load, retention of finished runs',
  async run(env: BenchEnv, opts: BenchOptions): Promise<SectionResult> {
    const n = opts.quick ? 30 : 200;
    const retentionMs = opts.quick ? 2000 : 4000;
    const load = opts.quick ? { chains: 30, steps: 30 } : { chains: 100, steps: 40 };
    const { prefix, bullPrefix } = env.ctx.keys;
    const childEnv = {
      ...(process.env.PATH ? { PATH: process.env.PATH } : {}),
      ...(process.env.HOME ? { HOME: process.env.HOME } : {}),
      ...env.appEnv,
    };

    // 1. Worker RSS: idle, then under load.
    const pool = await env.spawnPool(2);
    const pids = pool.pids();
    const samples = new Map<number, number[]>(pids.map((p) => [p, []]));
    const roundsDone: { kind: string; stepsPerSec: number }[] = [];
    const bytesPerRun: Record<string, number> = {};
    let perRunTable: (string | number)[][] = [];
    let usedPerRun = 0;
    let aofTable: (string | number)[][] = [];
    const aofPerRun: Record<string, number> = {};
    let idleKb: number[] = [];
    try {
      await env.reset();
      // Warm the processes once (script cache, JIT) so "idle" is a worker that has run.
      await runRound(env, pool, { kind: 'engine', chains: 10, steps: 10, tag: 'memwarm' });
      idleKb = await Promise.all(pids.map(rssKb));
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          const v = await Promise.all(pids.map(rssKb));
          v.forEach((kb, i) => Number.isFinite(kb) && samples.get(pids[i]!)!.push(kb));
          await sleep(100);
        }
      })();
      try {
        for (const kind of ['engine', 'effects'] as const) {
          for (let r = 0; r < (opts.quick ? 1 : 2); r++) {
            const res = await runRound(env, pool, { kind, ...load, tag: `mem${kind}${r}` });
            roundsDone.push({ kind, stepsPerSec: Math.round(res.stepsPerSec) });
          }
        }
      } finally {
        sampling = false;
        await sampler;
      }

      // 2. Bytes per completed run (default retention: nothing expires while we measure).
      await env.reset();
      const before = await usedMemory(env.admin);
      const base = await measureKeys(env.admin, prefix, bullPrefix);
      const mark = await aofMark(env.admin);
      await completeSupportRuns(env, pool, n, `mem${Date.now()}`);
      await sleep(1200); // appendfsync everysec: the last writes reach the file within a second
      const after = await measureKeys(env.admin, prefix, bullPrefix);
      const aof = await aofBytesByFamily(env.admin, mark, (key) => keyCategory(key, prefix, bullPrefix));
      const aofTotal = [...aof.values()].reduce((s, x) => s + x, 0);
      aofTable = [...aof.entries()]
        .sort((a, b) => b[1] - a[1])
        .map(([fam, bytes]) => {
          aofPerRun[fam] = round(bytes / n, 0);
          return [fam, round(bytes / n, 0), `${round((100 * bytes) / aofTotal, 1)} %`];
        });
      aofTable.push(['total', round(aofTotal / n, 0), '100 %']);
      usedPerRun = ((await usedMemory(env.admin)) - before) / n;
      const cats = [...after.byCategory.keys()].sort(
        (a, b) => after.byCategory.get(b)!.bytes - after.byCategory.get(a)!.bytes,
      );
      perRunTable = cats.map((cat) => {
        const a = after.byCategory.get(cat)!;
        const b = base.byCategory.get(cat) ?? { keys: 0, bytes: 0 };
        const per = (a.bytes - b.bytes) / n;
        bytesPerRun[cat] = round(per, 0);
        const own = RUN_CATEGORIES.includes(cat);
        return [
          cat,
          round((a.keys - b.keys) / n, 2),
          round(per, 0),
          own
            ? 'run keys: expire RUN_RETENTION_MS after the run ends'
            : cat.startsWith('bull: step job')
              ? `BullMQ: removed by the commit past the latest ${COMPLETED_WINDOW} per queue (fixed per shard)`
              : cat === 'index runs'
                ? 'per shard, one entry per run: pruned once the run expires'
                : cat.startsWith('bull: queue')
                  ? 'per shard queue (capped or constant: fixed, not per run)'
                  : 'shared per shard',
        ];
      });
    } finally {
      await pool.kill();
    }
    const runKeyBytes = RUN_CATEGORIES.reduce((s, c) => s + (bytesPerRun[c] ?? 0), 0);
    const allBytes = Object.values(bytesPerRun).reduce((s, x) => s + x, 0);

    // 3. Retention: workers with a short RUN_RETENTION_MS.
    const m = opts.quick ? 10 : 50;
    const short = await WorkerPool.start(1, { env: { ...childEnv, RUN_RETENTION_MS: String(retentionMs) } });
    env.onCleanup(() => short.kill());
    let kept: KeyReport;
    let gone: KeyReport;
    let finishedAt: number;
    let waitedMs: number;
    try {
      await env.reset();
      await completeSupportRuns(env, short, m, `ret${Date.now()}`);
      finishedAt = Date.now();
      kept = await measureKeys(env.admin, prefix, bullPrefix);
      await sleep(retentionMs + 1000);
      waitedMs = Date.now() - finishedAt;
      gone = await measureKeys(env.admin, prefix, bullPrefix);
    } finally {
      await short.kill();
    }
    const runBytes = (r: KeyReport) => RUN_CATEGORIES.reduce((s, c) => s + (r.byCategory.get(c)?.bytes ?? 0), 0);
    const runKeys = (r: KeyReport) => RUN_CATEGORIES.reduce((s, c) => s + (r.byCategory.get(c)?.keys ?? 0), 0);
    const runKeysWithTtl = RUN_CATEGORIES.reduce((s, c) => s + (kept.byCategory.get(c)?.withTtl ?? 0), 0);
    const retRows = [...new Set([...kept.byCategory.keys(), ...gone.byCategory.keys()])].sort().map((cat) => {
      const k = kept.byCategory.get(cat) ?? { keys: 0, bytes: 0, withTtl: 0 };
      const g = gone.byCategory.get(cat) ?? { keys: 0, bytes: 0, withTtl: 0 };
      return [cat, k.keys, k.withTtl, k.bytes, g.keys, g.bytes];
    });

    const rss = pids.map((p) => samples.get(p)!);
    const maxMb = Math.max(...rss.map((s) => Math.max(...s))) / 1024;
    const avgMb = mean(rss.flat()) / 1024;
    const idleMb = mean(idleKb) / 1024;
    const metrics: Metric[] = [
      {
        key: 'run_key_bytes_per_run',
        label: 'Redis bytes per completed run, its own keys (run, budget, journal, events, ledger)',
        value: runKeyBytes,
        unit: 'B',
        note: `${n} support-agent runs, ${SUPPORT_STEPS} steps, 2 ledger effects each`,
      },
      atMost(
        'all_key_bytes_per_run',
        `Redis bytes per completed run, everything incl. BullMQ (its fixed windows amortized over ${n} runs)`,
        allBytes,
        'B',
        16 * 1024,
      ),
      {
        key: 'aof_bytes_per_run',
        label: 'AOF bytes appended per completed run',
        value: round(
          Object.values(aofPerRun).reduce((s, x) => s + x, 0),
          0,
        ),
        unit: 'B',
      },
      { key: 'used_memory_per_run', label: 'INFO used_memory delta per run', value: round(usedPerRun, 0), unit: 'B' },
      {
        key: 'worker_rss_idle_mb',
        label: 'worker RSS idle (after a warm-up round), mean per process',
        value: round(idleMb, 1),
        unit: 'MB',
      },
      {
        key: 'worker_rss_load_avg_mb',
        label: 'worker RSS under load, mean per process',
        value: round(avgMb, 1),
        unit: 'MB',
        note: `${rss.flat().length} samples, 2 processes`,
      },
      {
        key: 'worker_rss_load_max_mb',
        label: 'worker RSS under load, max',
        value: round(maxMb, 1),
        unit: 'MB',
        note: roundsDone.map((r) => `${r.kind} ${r.stepsPerSec}/s`).join(', '),
      },
      {
        key: 'retention_run_keys_before',
        label: `retention ${retentionMs} ms: run keys right after ${m} runs finished (with a TTL)`,
        value: runKeys(kept),
        unit: 'keys',
        note: `${runKeysWithTtl} with TTL, ${runBytes(kept)} B`,
      },
      atMost(
        'retention_run_keys_after',
        `retention ${retentionMs} ms: run keys ${round(waitedMs / 1000, 1)} s after`,
        runKeys(gone),
        'keys',
        0,
        `${runBytes(gone)} B left`,
      ),
      atMost(
        'retention_run_keys_without_ttl',
        "finished runs' keys without a TTL",
        runKeys(kept) - runKeysWithTtl,
        'keys',
        0,
      ),
    ];
    return {
      name: this.name,
      title: this.title,
      metrics,
      tables: [
        {
          title: `Redis memory per completed support-agent run (MEMORY USAGE <key> SAMPLES 0 of every key after ${n} runs, minus before, / ${n})`,
          header: ['keys', 'keys/run', 'bytes/run', 'lifetime'],
          rows: perRunTable,
        },
        {
          title: `AOF bytes per completed run by key family (the incremental AOF over the same ${n} runs, parsed; scripts persist as their effects)`,
          header: ['family', 'bytes/run', 'share'],
          rows: aofTable,
        },
        {
          title: `Retention: RUN_RETENTION_MS=${retentionMs} on the worker; ${m} runs; keys and bytes right after they finished, and ${round(waitedMs / 1000, 1)} s later`,
          header: ['keys', 'keys after run', 'with TTL', 'bytes', `keys +${round(waitedMs / 1000, 1)} s`, 'bytes'],
          rows: retRows,
        },
        {
          title: 'Worker process RSS (VmRSS, /proc/<pid>/status), sampled every 100 ms during the load rounds',
          header: ['pid', 'idle MB', 'samples', 'mean MB', 'max MB'],
          rows: pids.map((p, i) => [
            p,
            round((idleKb[i] ?? NaN) / 1024, 1),
            rss[i]!.length,
            round(mean(rss[i]!) / 1024, 1),
            round(Math.max(...rss[i]!) / 1024, 1),
          ]),
        },
      ],
      details: {
        runs: n,
        bytesPerRun,
        aofPerRun,
        usedMemoryPerRun: round(usedPerRun, 0),
        rounds: roundsDone,
        retention: {
          ms: retentionMs,
          runs: m,
          waitedMs,
          before: Object.fromEntries(kept.byCategory),
          after: Object.fromEntries(gone.byCategory),
        },
      },
    };
  },
};
