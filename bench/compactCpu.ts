/**
 * `node dist/bench/compactCpu.js [runs] [--steps=40] [--inflight=20]` (after `npm run build`; default 400 runs): the
 * compactor's CPU, and Redis's, to compact one ended run (src/runs/compact.ts), alone. One run of the throughput
 * bench's shape (`steps` read-only steps) is made and ended, put back as it was before its compaction (journal list,
 * event stream, spec as JSON) and copied under `runs` run ids; then the copies are compacted, `inflight` at a time as
 * a compactor's pass does (each compaction's round trips leave the process idle and its wake-ups count), and the
 * process's CPU over those compactions (their reads and the packing script included) is divided by their number, for
 * each of five rounds: the median and the lowest are printed, with the median of Redis's CPU per run (INFO of the
 * bench's own redis-server over the same compactions). For finding what a run's end costs; not part of `npm run
 * bench`.
 */
import { createBenchEnv } from './lib/env.js';
import { runRound } from './lib/workload.js';
import { flag, positionals } from './lib/args.js';
import { median } from './lib/stats.js';
import { delta, snapshot } from './lib/redisInfo.js';
import { unpackJournal } from '../src/core/journal.js';
import { unpackEntries } from '../src/store/runEvents.js';
import { unpackSpec } from '../src/store/runRecord.js';
import { compactEndedRun } from '../src/runs/compact.js';

const n = Number(positionals()[0] ?? 400);
const steps = Number(flag('steps', '40'));
const inflight = Number(flag('inflight', '20'));
const env = await createBenchEnv({ quick: true, rounds: 1 });
const r = env.ctx.redis;
try {
  const pool = await env.spawnPool(1);
  await runRound(env, pool, { kind: 'engine', chains: 4, steps, tag: 'cmp' });
  await pool.kill();
  const jk = (await r.keys('*journal-packed*'))[0]!;
  const base = jk.replace(/:journal-packed$/, '');
  const runId = base.split(':run:')[1]!;
  const k = env.ctx.keys.run(runId);
  const entries = unpackJournal(await r.getBuffer(k.journalPacked));
  const events = unpackEntries(await r.getBuffer(k.eventsPacked));
  const spec = unpackSpec((await r.hget(k.run, 'spec'))!);
  await r.del(k.journalPacked, k.eventsPacked, k.events);
  await r.rpush(k.journal, ...entries);
  for (const [id, f] of events) await r.xadd(k.events, id, ...f);
  await r.hset(k.run, 'spec', spec);
  const dumps = await Promise.all([k.run, k.events, k.journal].map((key) => r.dumpBuffer(key)));
  let made = 0;
  /** `count` copies of the run as it was before its compaction, each under its own run id. */
  const copies = async (count: number): Promise<string[]> => {
    const ids = Array.from({ length: count }, () => `${runId}c${made++}`);
    for (const id of ids) {
      const c = env.ctx.keys.run(id);
      await r
        .multi()
        .restore(c.run, 0, dumps[0]!, 'REPLACE')
        .restore(c.events, 0, dumps[1]!, 'REPLACE')
        .restore(c.journal, 0, dumps[2]!, 'REPLACE')
        .exec();
    }
    return ids;
  };
  const redisPerRun: number[] = [];
  const compactAll = async (ids: string[]): Promise<number> => {
    const before = await snapshot(env.admin);
    const c0 = process.cpuUsage();
    for (let i = 0; i < ids.length; i += inflight) {
      const done = await Promise.all(ids.slice(i, i + inflight).map((id) => compactEndedRun(r, env.ctx.keys, id)));
      if (!done.every((d) => d.run)) throw new Error('a copy was not compacted');
    }
    const c = process.cpuUsage(c0);
    redisPerRun.push(delta(before, await snapshot(env.admin)).cpuUs / ids.length);
    return (c.user + c.system) / ids.length;
  };
  await compactAll(await copies(200)); // warm-up
  redisPerRun.length = 0;
  const perRun: number[] = [];
  for (let round = 0; round < 5; round++) perRun.push(await compactAll(await copies(n)));
  console.log(
    `compactEndedRun, ${inflight} in flight: median ${median(perRun).toFixed(0)} µs CPU per run, lowest ` +
      `${Math.min(...perRun).toFixed(0)}; Redis's CPU per run: median ${median(redisPerRun).toFixed(0)} µs ` +
      `(journal ${entries.length} entries, events ${events.length}, spec ${spec.length} B)`,
  );
} finally {
  await env.cleanup();
}
