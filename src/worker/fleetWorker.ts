/**
 * A worker process's BullMQ workers (one per consumed shard) and its SIGTERM
 * handoff:
 *  1. /readyz turns unready; no new jobs are taken (workers close);
 *  2. in-flight model calls and reads are aborted (no outside effect) and each
 *     held job is handed back at once with moveToWait + WaitingError, so
 *     another worker starts it within milliseconds;
 *  3. a write dispatch that already left the process may finish and record its
 *     outcome until the grace period ends; then it is aborted too (the ledger
 *     keeps it `dispatched`, and the next owner reconciles it).
 */
import { setMaxListeners } from 'node:events';
import { UnrecoverableError, Worker, WaitingError, type Job } from 'bullmq';
import type { EngineContext } from '../runs/engineContext.js';
import { RunSpecCache } from '../runs/store.js';
import { fetchLoopState, paceFullFetches, timeFetches, wakeAnotherWorker } from '../store/bullmqInternals.js';
import { InvalidStepInput, InvariantError } from '../core/errors.js';
import { settledWithin } from '../core/timeout.js';
import { settleFailedJob } from '../runs/stuckRuns.js';
import { testHooksFrom, type CrashPoints } from '../config/testHooks.js';
import type { EffectRunner } from './effects.js';
import { StepProcessor } from './step/processor.js';
import { OwnerWatch } from './ownerWatch.js';
import { PassLoop } from '../core/passLoop.js';
import { FetchWatch } from './fetchWatch.js';
import { runIdOfStepJob } from '../store/keys.js';
import { VersionGate } from './versionGate.js';
import { VersionRegistry } from '../runs/versions.js';
import { FlowRepair } from '../flow/repair.js';

/** How long close() may take once no job is held any more. */
const CLOSE_TIMEOUT_MS = 1500;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface FleetWorkerOptions {
  effects?: EffectRunner;
  shards?: number[];
  crash?: CrashPoints;
  /** Called when shutdown finishes (main.ts exits the process). */
  onStopped?: () => void;
}

export class FleetWorker {
  readonly workers: Worker[] = [];
  private readonly soft = new AbortController();
  private readonly hard = new AbortController();
  private stopping?: Promise<void>;
  readonly processor: StepProcessor;
  ready = false;
  /** Jobs this process holds right now (for the shutdown diagnostics). */
  readonly held = new Set<string>();

  private readonly crash: CrashPoints;
  /** Names each worker's lock tokens after its Redis connection and requeues the jobs of vanished ones. */
  readonly ownerWatch: OwnerWatch;
  /** The agent versions this process serves, announced to the other workers while it runs. */
  readonly versions: VersionGate;
  /** The shards this process consumes, in the order of `workers`. */
  private readonly shards: readonly number[];
  /** Replaces a shard's worker whose fetch loop stopped (src/worker/fetchWatch.ts). */
  private readonly fetchWatch: FetchWatch;
  /** Flow control's bookkeeping (FLOW_SWEEP_MS), when FLOW_CONTROL is on. */
  private flowSweep?: PassLoop;

  constructor(
    private readonly ctx: EngineContext,
    opts: FleetWorkerOptions = {},
  ) {
    const { cfg } = ctx;
    this.crash = opts.crash ?? testHooksFrom(cfg).crash;
    // Every step in flight (WORKER_CONCURRENCY per shard) listens on these while it waits on a call: not a leak.
    setMaxListeners(0, this.soft.signal, this.hard.signal);
    const shards = opts.shards ?? (cfg.WORKER_SHARDS.length > 0 ? cfg.WORKER_SHARDS.map(Number) : ctx.keys.allShards());
    // Throws ConfigError (WORKER_AGENT_VERSIONS) before any job is taken when a listed version is not loaded.
    this.versions = new VersionGate(
      ctx.agents,
      new VersionRegistry(ctx.redis, ctx.keys, cfg.VERSION_TTL_MS),
      cfg,
      ctx.log,
      shards,
      (runId) => ctx.keys.shardOf(runId),
    );
    this.processor = new StepProcessor({
      cfg,
      redis: ctx.redis,
      keys: ctx.keys,
      store: ctx.store,
      specs: new RunSpecCache(ctx.store),
      agents: ctx.agents,
      versions: this.versions,
      providers: ctx.providers,
      metrics: ctx.metrics,
      log: ctx.log,
      crash: this.crash,
      tracer: ctx.tracing.tracer,
      rates: ctx.rates,
      childRuns: ctx.childRuns,
      ...(ctx.admission?.enabled ? { admission: ctx.admission } : {}),
      ...(opts.effects ? { effects: opts.effects } : {}),
    });
    const watched: { shard: number; worker: Worker }[] = [];
    for (const shard of shards) {
      const worker = this.createWorker(shard);
      this.workers.push(worker);
      watched.push({ shard, worker });
    }
    this.shards = shards;
    this.fetchWatch = new FetchWatch(
      {
        redis: ctx.redis,
        keys: ctx.keys,
        log: ctx.log,
        metrics: ctx.metrics,
        stallMs: cfg.FETCH_STALL_MS,
        concurrency: cfg.WORKER_CONCURRENCY,
        heldOn: (shard) => [...this.held].filter((id) => this.shardOfJob(id) === shard).length,
        restart: (shard) => this.restartShard(shard),
        loopState: (shard) => fetchLoopState(this.workers[this.shards.indexOf(shard)]!),
      },
      shards,
    );
    this.ownerWatch = new OwnerWatch(ctx, watched, {
      intervalMs: cfg.OWNER_WATCH_MS,
      probeMs: cfg.OWNER_PROBE_MS,
      maxStalledCount: cfg.MAX_STALLED_COUNT,
    });
  }

  /** A BullMQ worker consuming one shard's queue, its events wired to the run bookkeeping and the fetch watch. */
  private createWorker(shard: number): Worker {
    const { ctx } = this;
    const { cfg } = ctx;
    const worker = new Worker(ctx.keys.queueName(shard), (job, token) => this.handle(job, token), {
      connection: ctx.redis,
      prefix: ctx.keys.bullPrefix,
      concurrency: cfg.WORKER_CONCURRENCY,
      lockDuration: cfg.LOCK_DURATION_MS,
      stalledInterval: cfg.STALLED_INTERVAL_MS,
      maxStalledCount: cfg.MAX_STALLED_COUNT,
      autorun: false,
    });
    // How long a stopped loop has waited on its marker or its fetch, in the fetch watch's restart log.
    timeFetches(worker);
    // A full Redis refuses the fetch too: asked again after STORE_RETRY_AFTER_S, not at once (BullMQ's loop spun).
    paceFullFetches(worker, cfg.STORE_RETRY_AFTER_S * 1000);
    worker.on('error', (err) => ctx.log.warn({ code: 'worker_error', err }, 'worker error'));
    worker.on('stalled', () => ctx.metrics.stallRecoveries.inc());
    worker.on('active', () => this.fetchWatch?.fetched(shard));
    worker.on('drained', () => this.fetchWatch?.fetched(shard));
    // A job BullMQ failed for good ends its run with a reason (a retried attempt changes nothing:
    // the script settles only a run whose current job sits in the failed set). If this process
    // dies before it runs, the reconciler's sweep settles the run (src/runs/stuckRuns.ts).
    worker.on('failed', (job, err) => {
      if (!job) return;
      settleFailedJob(ctx, job, err).catch((e: unknown) =>
        ctx.log.error(
          { code: 'settle_failed', jobId: job.id, err: e },
          'could not end the run of a failed job (the sweep will)',
        ),
      );
    });
    return worker;
  }

  /**
   * A shard's fetch loop stopped (src/worker/fetchWatch.ts): a new BullMQ worker, named after its connection, takes
   * its place; the old one is closed without waiting (the jobs it holds finish or are delivered again, fenced).
   */
  private async restartShard(shard: number): Promise<void> {
    if (!this.ready) return;
    const i = this.shards.indexOf(shard);
    const old = this.workers[i]!;
    const fresh = this.createWorker(shard);
    await this.ownerWatch.replace(old, fresh);
    this.workers[i] = fresh;
    void fresh.run().catch((err: unknown) => this.ctx.log.error({ code: 'worker_run_failed', err }));
    void old.close(true).catch(() => {});
  }

  private shardOfJob(jobId: string): number | undefined {
    const runId = runIdOfStepJob(jobId);
    return runId === undefined ? undefined : this.ctx.keys.shardOf(runId);
  }

  /**
   * Names every worker's lock tokens after its Redis connection (one CLIENT ID each), then runs the
   * workers and the owner watch. Resolves once they run; a failure here (Redis gone) rejects and no
   * job was taken.
   */
  async start(): Promise<void> {
    await this.nameOwners();
    this.run();
  }

  /**
   * First half of start(): after it, `workers[i].id` is final (what a process logs before it takes any job),
   * and the versions this process serves are announced (so peers hand their steps over from its first job on).
   */
  async nameOwners(): Promise<void> {
    await Promise.all([this.ownerWatch.name(), this.versions.start()]);
  }

  /** Second half of start(): the workers fetch jobs from now on. */
  run(): void {
    for (const w of this.workers)
      void w.run().catch((err: unknown) => this.ctx.log.error({ code: 'worker_run_failed', err }));
    this.ownerWatch.start();
    this.fetchWatch.start();
    this.startFlowSweep();
    this.ready = true;
  }

  /**
   * Every FLOW_SWEEP_MS: slots of runs no longer at work, admissions whose admitter died, then admit
   * (src/flow/admission.ts); every FLOW_REPAIR_MS, flow state a lost write left behind (src/flow/repair.ts).
   */
  private startFlowSweep(): void {
    const admission = this.ctx.admission;
    if (!admission?.enabled || this.flowSweep) return;
    const { redis, keys, queues, cfg, metrics, log } = this.ctx;
    const repair = new FlowRepair({ redis, keys, queues, cfg, metrics, log, admission });
    let repairAt = Date.now() + cfg.FLOW_REPAIR_MS;
    this.flowSweep = new PassLoop({
      pass: async () => {
        await admission.sweep();
        // Flow state checked against the runs' own once a period (one worker of the fleet takes each period).
        if (Date.now() < repairAt) return;
        repairAt = Date.now() + cfg.FLOW_REPAIR_MS;
        await repair.tick();
      },
      intervalMs: cfg.FLOW_SWEEP_MS,
      onError: (err) => {
        admission.forgetOwner();
        log.warn({ code: 'flow_sweep_failed', err }, 'flow control bookkeeping failed (next tick retries)');
      },
      pauseFirst: true,
      unref: true,
    });
    this.flowSweep.start();
  }

  private async handle(job: Job, token?: string): Promise<void> {
    if (!token) throw new InvariantError('internals_changed', 'BullMQ did not pass a lock token');
    this.held.add(job.id!);
    try {
      // The step's commit completes the job and, unless we are stopping, fetches the next one, locked
      // with this job's token: not when that token names a connection since replaced (a watcher would
      // take the next job at once); BullMQ's loop then fetches with a token naming the current one.
      await this.processor.process(
        job,
        token,
        this.soft.signal,
        this.hard.signal,
        () => !this.soft.signal.aborted && this.ownerWatch.isCurrent(token),
      );
    } catch (err) {
      if (this.soft.signal.aborted) {
        // Hand the job back now; it does not count as an attempt.
        await job.moveToWait(token);
        // moveToWait wakes ONE blocked worker through the queue's marker (BullMQ internal layout), and
        // that may be this closing worker's own blocking connection, which then drops it: the next
        // worker would only see the job after its block timeout (drainDelay, 5 s). A second marker
        // wakes another worker at once (a spare marker only costs an idle worker one empty fetch).
        await wakeAnotherWorker(this.ctx.redis, this.ctx.keys.queueMarker(job.queueName));
        this.ctx.metrics.sigtermHandoffs.inc();
        this.ctx.log.info({ code: 'sigterm_handoff', jobId: job.id }, 'job handed back');
        throw new WaitingError();
      }
      // Input that no longer parses: no retry can help, fail the job now (the failed event ends the run).
      if (err instanceof InvalidStepInput) throw Object.assign(new UnrecoverableError(err.message), { cause: err });
      throw err;
    } finally {
      this.held.delete(job.id!);
    }
  }

  /** Graceful stop (idempotent). A second call with force=true aborts dispatches at once. */
  stop(force = false): Promise<void> {
    this.ready = false;
    // Not awaited, as the owner watch below: a pass may wait on a reconnecting connection.
    void this.flowSweep?.stop();
    void this.fetchWatch.stop();
    if (force) this.hard.abort(new Error('forced shutdown'));
    if (this.stopping) return this.stopping;
    this.soft.abort(new Error('worker shutting down'));
    // Test-only: die inside the grace period (the next owner reconciles whatever was in flight).
    setTimeout(() => this.crash.hit('during_grace'), 50).unref();
    const grace = setTimeout(() => this.hard.abort(new Error('grace period over')), this.ctx.cfg.SHUTDOWN_GRACE_MS);
    this.stopping = (async () => {
      void this.ownerWatch.stop(); // not awaited: a tick may wait on a reconnecting connection
      // Withdrawn first: a step of a version only this process served parks at once instead of bouncing until the
      // lapse.
      void this.versions.stop();
      // close() stops fetching at once and resolves when the processors are done and the
      // connections closed. It can hang on a connection that is reconnecting (a Redis restart;
      // BullMQ #2430, #4656): once every held job is handed back or finished, it gets
      // CLOSE_TIMEOUT_MS more, and then the process leaves anyway (nothing is held).
      const closed = Promise.all(this.workers.map((w) => w.close()));
      const clean = await Promise.race([
        closed.then(() => true),
        this.heldDrained().then(() => settledWithin(closed, CLOSE_TIMEOUT_MS)),
      ]);
      clearTimeout(grace);
      if (!clean)
        this.ctx.log.warn(
          { code: 'close_timeout', worker: 'steps', timeoutMs: CLOSE_TIMEOUT_MS },
          'worker connections did not close; every job was handed back, leaving anyway',
        );
      // No step runs any more: the spend settled in memory goes to Redis before the process does.
      if (!(await settledWithin(this.processor.close(), CLOSE_TIMEOUT_MS)))
        this.ctx.log.warn(
          { code: 'close_timeout', worker: 'spend', timeoutMs: CLOSE_TIMEOUT_MS },
          'spend settlements not sent in time; leaving without them',
        );
    })();
    return this.stopping;
  }

  private async heldDrained(): Promise<void> {
    while (this.held.size > 0) await sleep(20);
  }
}
