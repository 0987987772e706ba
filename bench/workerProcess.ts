/**
 * A bench worker process. Builds a context from its environment (the bench
 * passes REDIS_URL, prefixes, SANDBOX_URL...) and, on the parent's command,
 * runs one round of either the plain BullMQ chain or the engine (FleetWorker
 * with the ledger's effect runner), reporting progress over IPC.
 *
 *   prepare {kind} -> workers built, connected, not running
 *   go             -> workers run; progress messages every 20 ms
 *   finish         -> workers closed; round stats returned
 *   exit           -> context closed, process exits
 *
 * Exits by itself when the parent goes away (IPC disconnect).
 *
 * With BENCH_ROLE=compactor it runs no step: from go to finish it runs the reconciler's compactor
 * (src/runs/compactor.ts), and finish returns once every run the round ended is packed, its CPU to then.
 */
import type { Job, Worker, Queue } from 'bullmq';
import { loadConfig } from '../src/config/config.js';
import { createContext } from '../src/server/buildContext.js';
import { createLogger } from '../src/metrics/log.js';
import { createRedis, targetOf } from '../src/store/connect.js';
import { createEffectRunner } from '../src/ledger/runner.js';
import { FleetWorker } from '../src/worker/fleetWorker.js';
import { clientCounts, commandsSent, diffCounts, installClientCounter } from './lib/clientCounter.js';
import type { ChildMessage, ChildRoundStats, ParentMessage, PrepareSpec } from './lib/protocol.js';
import { nowMs } from './lib/stats.js';
import { ALLOC_PROFILE_ENV, AllocSampler } from './lib/heapprof.js';
import { plainQueue, plainWorker } from './plainChain.js';
import { Compactor } from '../src/runs/compactor.js';
import { PassLoop } from '../src/core/passLoop.js';

installClientCounter();

const send = (m: ChildMessage): void => {
  if (process.connected) process.send!(m);
};

const cfg = loadConfig(process.env);
const log = createLogger('bench-worker', cfg.LOG_LEVEL);
const ctx = await createContext(cfg, 'bench-worker', { log });
const plainRedis = createRedis(targetOf(cfg), 'bench-plain');
const plainQueues = new Map<string, Queue>();
const allocDir = process.env[ALLOC_PROFILE_ENV];
const allocSampler = allocDir ? new AllocSampler(allocDir) : undefined;
const role: ChildRoundStats['role'] = process.env.BENCH_ROLE === 'compactor' ? 'compactor' : 'worker';

interface Round {
  spec: PrepareSpec;
  workers: Worker[];
  close(): Promise<void>;
  start(): void;
  stats: ChildRoundStats;
  started: Map<string, number>;
  cpu0?: NodeJS.CpuUsage;
  main0?: NodeJS.CpuUsage;
  sent0: number;
  counts0: Record<string, number>;
  timer?: NodeJS.Timeout;
  reported: number;
}

let round: Round | undefined;
/** The compactor's: when a pass of this round last packed a run (0: none). */
let packedAt = 0;

async function prepare(spec: PrepareSpec): Promise<void> {
  if (round) throw new Error('a round is already prepared');
  packedAt = 0;
  let workers: Worker[];
  let close: () => Promise<void>;
  let start: () => void;
  if (role === 'compactor') {
    // The compactor's passes every COMPACT_INTERVAL_MS, as Compactor.start runs them, noting when a pass last packed
    // a run: the round is not over before its last run is packed (runRound's wall clock ends there).
    const compactor = new Compactor(ctx);
    const pass = async () => {
      const report = await compactor.pass();
      if (report.packed > 0) packedAt = nowMs();
      return report;
    };
    const loop = new PassLoop({
      pass,
      intervalMs: cfg.COMPACT_INTERVAL_MS,
      onError: (err) => console.error(`[bench-compactor ${process.pid}] pass: ${(err as Error).message}`),
    });
    workers = [];
    start = () => loop.start();
    // Every run the round ended packed before the round's CPU is read.
    close = async () => {
      await loop.stop();
      while ((await pass()).claimed > 0);
    };
  } else if (spec.kind === 'plain') {
    let q = plainQueues.get(spec.queueName);
    if (!q) {
      q = plainQueue(plainRedis, cfg, spec.queueName);
      plainQueues.set(spec.queueName, q);
    }
    const w = plainWorker(plainRedis, cfg, q);
    workers = [w];
    close = () => w.close();
    start = () =>
      void w.run().catch((err: Error) => console.error(`[bench-worker ${process.pid}] plain worker: ${err.message}`));
  } else {
    const fleet = new FleetWorker(ctx, { effects: createEffectRunner(ctx) });
    workers = fleet.workers;
    close = () => fleet.stop();
    start = () =>
      void fleet.start().catch((err: Error) => console.error(`[bench-worker ${process.pid}] fleet: ${err.message}`));
  }
  await Promise.all(workers.map((w) => w.waitUntilReady()));
  const r: Round = {
    spec,
    workers,
    close,
    start,
    started: new Map(),
    sent0: 0,
    counts0: {},
    reported: 0,
    stats: {
      pid: process.pid,
      role,
      completed: 0,
      failed: 0,
      failures: [],
      goAt: 0,
      firstActiveAt: 0,
      lastAt: 0,
      cpuUs: 0,
      mainUs: 0,
      commandsSent: 0,
      byCommand: {},
      ...(spec.recordLatency ? { latencies: [], completedAt: [] } : {}),
    },
  };
  for (const w of workers) {
    w.on('error', (err) => console.error(`[bench-worker ${process.pid}] worker error: ${err.message}`));
    w.on('active', (job: Job) => {
      const t = nowMs();
      if (r.stats.firstActiveAt === 0) r.stats.firstActiveAt = t;
      if (spec.recordLatency) r.started.set(job.id!, t);
    });
    w.on('completed', (job: Job) => {
      const t = nowMs();
      const s = r.stats;
      s.completed++;
      s.lastAt = t;
      s.commandsSent = commandsSent() - r.sent0;
      if (spec.recordLatency) {
        const t0 = r.started.get(job.id!);
        r.started.delete(job.id!);
        if (t0 !== undefined) s.latencies!.push(t - t0);
        s.completedAt!.push(t);
      }
    });
    w.on('failed', (job: Job | undefined, err: Error) => {
      r.stats.failed++;
      if (r.stats.failures.length < 5) r.stats.failures.push(`${job?.id ?? '?'}: ${err.message}`);
    });
  }
  round = r;
}

async function go(): Promise<void> {
  const r = round;
  if (!r) throw new Error('no round prepared');
  // Sampling starts before the round's clock and CPU reading, so its own start-up is outside both.
  await allocSampler?.start();
  r.stats.goAt = nowMs();
  r.cpu0 = process.cpuUsage();
  r.main0 = process.threadCpuUsage();
  r.sent0 = commandsSent();
  r.counts0 = clientCounts();
  r.timer = setInterval(() => {
    const s = r.stats;
    if (s.completed + s.failed !== r.reported) {
      r.reported = s.completed + s.failed;
      // CPU sampled here (not per job: cpuUsage() is a syscall): at most one tick past the last completion.
      const cpu = process.cpuUsage(r.cpu0);
      s.cpuUs = cpu.user + cpu.system;
      const main = process.threadCpuUsage(r.main0);
      s.mainUs = main.user + main.system;
      send({ type: 'progress', completed: s.completed, failed: s.failed, lastAt: s.lastAt });
    }
  }, 20);
  r.start();
}

async function finish(): Promise<ChildRoundStats> {
  const r = round;
  if (!r) throw new Error('no round prepared');
  if (r.timer) clearInterval(r.timer);
  if (role === 'compactor') {
    // Its work is not steps: its CPU runs from go to the last run packed, after the round's last step.
    await r.close();
    r.stats.lastAt = packedAt;
    const cpu = process.cpuUsage(r.cpu0);
    r.stats.cpuUs = cpu.user + cpu.system;
    const main = process.threadCpuUsage(r.main0);
    r.stats.mainUs = main.user + main.system;
    r.stats.commandsSent = commandsSent() - r.sent0;
    r.stats.byCommand = diffCounts(clientCounts(), r.counts0);
    round = undefined;
    return r.stats;
  }
  r.stats.byCommand = diffCounts(clientCounts(), r.counts0);
  await allocSampler?.stop(r.spec.kind, r.stats.completed);
  await r.close();
  round = undefined;
  return r.stats;
}

async function handle(msg: ParentMessage): Promise<unknown> {
  switch (msg.cmd) {
    case 'prepare':
      return prepare(msg.spec);
    case 'go':
      return go();
    case 'finish':
      return finish();
    case 'exit':
      await shutdown(0);
      return undefined;
  }
}

async function shutdown(code: number): Promise<never> {
  try {
    if (round) await round.close();
    await Promise.all([...plainQueues.values()].map((q) => q.close()));
    plainRedis.disconnect();
    await ctx.close();
  } finally {
    process.exit(code);
  }
}

process.on('message', (msg: ParentMessage) => {
  handle(msg).then(
    (result) => send({ type: 'reply', id: msg.id, ok: true, ...(result !== undefined ? { result } : {}) }),
    (err: Error) => send({ type: 'reply', id: msg.id, ok: false, error: err.stack ?? err.message }),
  );
});
process.on('disconnect', () => process.exit(0));
process.on('SIGTERM', () => void shutdown(0));
send({ type: 'hello', pid: process.pid });
