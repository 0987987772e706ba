/**
 * No run is lost silently: a run whose current step job died ends with a status,
 * a reason code, a status journal entry, a `status_changed` event and
 * `agent_runs_finished_total{status,reason}` (src/store/lua/settleRun-8.lua, atomic and fenced:
 * only a run that still waits on that very job, queued or running, is touched).
 *
 * Two ways in:
 *  - the worker's `failed` event (src/worker/fleetWorker.ts): BullMQ failed the job for
 *    good (attempts exhausted, stalled more than allowed, data or spec that no longer parses);
 *  - the reconciler's sweep (`sweepStuckRuns`): a worker that died before its `failed`
 *    handler ran, a job deleted or lost, a job completed without a commit. It walks the
 *    per-shard run index (no SCAN), a bounded slice per sweep, and settles only runs
 *    untouched for `STUCK_RUN_MIN_AGE_MS`.
 *
 * A running run whose job is missing (deleted, or a write of its queue lost in a failover) gets
 * it back: the step job is re-created (`step_job_recreated`, `agent_step_jobs_recreated_total`),
 * which is a redelivery like any other: the step replays its journal and reconciles its actions
 * by key. A job that keeps vanishing (more than MAX_JOB_RECREATIONS times) and a job stalled too
 * often may have had a write in flight: the run goes to `needs_human` (the ledger holds each
 * action's state; a person can resume the run). A queued run's missing job is not re-created:
 * under flow control it waits for its admission, which a new job would skip.
 * Input that no longer parses and exhausted attempts end the run `failed`.
 * Reasons are codes (`attempts_exhausted: transient`), never error messages or customer text.
 */
import type { Logger } from 'pino';
import type { Config } from '../config/config.js';
import { errorCode, InvalidStepInput } from '../core/errors.js';
import { countRunFinished, type Metrics } from '../metrics/metrics.js';
import type { RedisClient } from '../store/connect.js';
import { settleRunCall } from '../store/calls/settleRun.js';
import { type KeySpace, runIdOfStepJob } from '../store/keys.js';
import { isWaitStatus } from './waits.js';
import type { ChildRuns } from './children.js';
import { decodeRun, runFieldsToRead, type RunField } from '../store/runRecord.js';
import { retentionAtEnd } from '../store/archiveQueue.js';

export type DeadJobState = 'failed' | 'missing' | 'completed';

/** How many times the sweep re-creates one run's missing step job before it hands the run to a person. */
export const MAX_JOB_RECREATIONS = 3;

export interface SettleDeps {
  redis: RedisClient;
  keys: KeySpace;
  cfg: Pick<Config, 'EVENTS_MAX_LEN' | 'RUN_RETENTION_MS' | 'ARCHIVE_URL'>;
  metrics: Metrics;
  log: Logger;
}

export interface SettleRequest {
  runId: string;
  jobId: string;
  /** The state the caller saw the job in; the script checks it again. */
  jobState: DeadJobState;
  status: 'failed' | 'needs_human';
  reason: string;
  now: number;
  /** The run must not have been updated for this long (0: no minimum). */
  minAgeMs: number;
}

/**
 * Ends the run through settleRun-8.lua (src/store/calls/settleRun.ts), counted and logged. Returns whether the run was
 * ended, or why not.
 */
export async function settleRun(d: SettleDeps, req: SettleRequest): Promise<{ settled: boolean; why: string }> {
  const shard = d.keys.shardOf(req.runId);
  const k = d.keys.run(req.runId);
  const { settled, why } = await settleRunCall(
    d.redis,
    {
      ...k,
      jobHash: d.keys.jobHash(shard, req.jobId),
      failedSet: d.keys.finishedSet(shard, 'failed'),
      completedSet: d.keys.finishedSet(shard, 'completed'),
    },
    { ...req, eventsMaxLen: d.cfg.EVENTS_MAX_LEN, retentionMs: retentionAtEnd(d.cfg) },
  );
  if (!settled) return { settled: false, why };
  countRunFinished(d.metrics, req.status, req.reason);
  d.log.error(
    { code: 'run_settled', runId: req.runId, jobId: req.jobId, job: why, status: req.status, reason: req.reason },
    'run ended: its step job died',
  );
  return { settled: true, why };
}

const STALLED = 'job stalled more than allowable limit';
const STARTED = 'job started more than allowable limit';

/** What a job's final failure means for its run (a bounded reason code, never the error's text). */
export function classifyFailure(err: unknown): { status: 'failed' | 'needs_human'; reason: string } {
  const e = err as (Error & { cause?: unknown }) | undefined;
  if (e?.message === STALLED) return { status: 'needs_human', reason: 'stalled_too_often' };
  if (e?.message === STARTED) return { status: 'needs_human', reason: 'started_too_often' };
  const cause = e?.cause;
  if (cause instanceof InvalidStepInput) return { status: 'failed', reason: cause.message };
  if (err instanceof InvalidStepInput) return { status: 'failed', reason: err.message };
  return { status: 'failed', reason: `attempts_exhausted: ${errorCode(err)}` };
}

/** The failed reason BullMQ stored on a job (its hash), classified like the error itself. */
function classifyFailedReason(failedReason: string | null): { status: 'failed' | 'needs_human'; reason: string } {
  if (failedReason === STALLED) return { status: 'needs_human', reason: 'stalled_too_often' };
  if (failedReason === STARTED) return { status: 'needs_human', reason: 'started_too_often' };
  const m = /^(invalid_job_data|invalid_spec): ([\w.]{1,80})$/.exec(failedReason ?? '');
  if (m) return { status: 'failed', reason: `${m[1]}: ${m[2]}` };
  return { status: 'failed', reason: 'attempts_exhausted: job_failed' };
}

/**
 * Called from the worker's `failed` event for every failed attempt: only a job that BullMQ
 * failed for good (it sits in the queue's failed set) ends its run; a retried one is left alone.
 */
export async function settleFailedJob(
  d: SettleDeps,
  job: { id?: string | undefined },
  err: unknown,
  now = Date.now(),
): Promise<boolean> {
  // The run comes from the job id (deterministic), never from job data that may not parse.
  const jobId = job.id;
  const runId = jobId ? runIdOfStepJob(jobId) : undefined;
  if (!jobId || !runId) return false;
  const { status, reason } = classifyFailure(err);
  const r = await settleRun(d, { runId, jobId, jobState: 'failed', status, reason, now, minAgeMs: 0 });
  return r.settled;
}

export interface StuckRunsReport {
  /** Queued or running runs whose current job was looked at. */
  checked: number;
  settled: number;
  /** Runs skipped because their record does not decode, or their check threw (`stuck_run_skipped`). */
  skipped: number;
  /** Shards whose sweep stopped on an error (`stuck_runs_sweep_failed`): the reconciler's sweep is `failed`. */
  failedShards: number;
}

/**
 * Sweeps the run index for runs whose current job is failed, missing or completed without a
 * commit. Walks at most `perSweep` index entries per shard per call, resuming where the last
 * call stopped (`cursors`), so one sweep stays bounded however many runs are retained.
 */
export class StuckRuns {
  private readonly cursors = new Map<number, number>();

  constructor(
    private readonly d: SettleDeps & {
      cfg: SettleDeps['cfg'] & Pick<Config, 'STUCK_RUN_MIN_AGE_MS' | 'STUCK_RUN_SCAN_PER_SWEEP'>;
      /** Re-creates a parked wait's missing wake job (its worker died between the commit and the add). */
      store?: { ensureCurrentStepJob(runId: string): Promise<void> };
      /** Promotes the wake job of a parent whose child ended (the child's own promotion was lost). */
      children?: Pick<ChildRuns, 'wakeIfChildEnded'>;
    },
  ) {}

  async sweep(nowMs = Date.now(), batch = 500): Promise<StuckRunsReport> {
    const report: StuckRunsReport = { checked: 0, settled: 0, skipped: 0, failedShards: 0 };
    for (const shard of this.d.keys.allShards()) {
      // One shard's failure (Redis unreachable) neither stops the others nor the rest of the reconciler's sweep; it
      // is counted, and the reconciler reports its sweep failed (agent_reconciler_sweeps_total{outcome="failed"}).
      await this.sweepShard(shard, nowMs, batch, report).catch((err: unknown) => {
        report.failedShards++;
        this.d.metrics.stuckRunSweepFailures.inc({ stage: 'shard', code: errorCode(err) });
        this.d.log.error(
          { code: 'stuck_runs_sweep_failed', shard, error: errorCode(err), err },
          'stuck-run sweep of a shard failed',
        );
      });
    }
    return report;
  }

  private async sweepShard(shard: number, nowMs: number, batch: number, report: StuckRunsReport): Promise<void> {
    const { redis, keys, cfg } = this.d;
    const minAge = cfg.STUCK_RUN_MIN_AGE_MS;
    let offset = this.cursors.get(shard) ?? 0;
    let walked = 0;
    while (walked < cfg.STUCK_RUN_SCAN_PER_SWEEP) {
      const ids = await redis.zrange(keys.runIndex(shard), offset, offset + batch - 1);
      walked += ids.length;
      offset += ids.length;
      if (ids.length === 0) {
        offset = 0;
        break;
      }
      const fields = ['jobId', 'updatedAt'] as const;
      // Per run: one run key that cannot be read (WRONGTYPE) is that run's failure, not its batch's.
      const runs = await pipelined(
        redis,
        ids.map((id) => ['hmget', keys.run(id).run, ...runFieldsToRead(fields)]),
        'each',
      );
      const candidates = ids
        .map((runId, i) => ({ runId, run: this.decoded(runId, fields, runs[i], report) }))
        .filter(
          ({ run }) =>
            run &&
            (run.status === 'running' || run.status === 'queued' || isWaitStatus(run.status)) &&
            run.jobId &&
            run.updatedAt <= nowMs - minAge,
        )
        .map(({ runId, run }) => ({ runId, jobId: run!.jobId, status: run!.status }));
      report.checked += candidates.length;
      if (candidates.length > 0) {
        const jobs = await pipelined(
          redis,
          candidates.flatMap(({ jobId }) => [
            ['exists', keys.jobHash(shard, jobId)],
            ['hget', keys.jobHash(shard, jobId), 'failedReason'],
            ['zscore', keys.finishedSet(shard, 'failed'), jobId],
            ['zscore', keys.finishedSet(shard, 'completed'), jobId],
          ]),
        );
        for (let i = 0; i < candidates.length; i++) {
          const { runId, jobId } = candidates[i]!;
          const [exists, failedReason, failed, completed] = jobs.slice(4 * i, 4 * i + 4);
          const dead = deadVerdict(
            exists === 1,
            failed !== null,
            completed !== null,
            (failedReason as string | null) ?? null,
          );
          if (!dead) {
            if (candidates[i]!.status === 'waiting_child') await this.wakeParent(runId, nowMs - minAge);
            continue;
          }
          if (dead.jobState === 'missing' && (await this.recreated(runId, jobId, candidates[i]!.status))) continue;
          const r = await settleRun(this.d, { runId, jobId, ...dead, now: nowMs, minAgeMs: minAge });
          if (r.settled) report.settled++;
        }
      }
      if (ids.length < batch) {
        offset = 0;
        break;
      }
    }
    this.cursors.set(shard, offset);
  }

  /**
   * The run's fields, or undefined when its record cannot be read or does not decode (a status or a field no release
   * writes): that run is skipped, named and counted, and the rest of its batch is checked.
   */
  private decoded<F extends RunField>(
    runId: string,
    fields: readonly F[],
    values: unknown,
    report: StuckRunsReport,
  ): ReturnType<typeof decodeRun<F>> {
    try {
      if (values instanceof Error) throw values;
      return decodeRun(fields, (values as (string | null)[] | null) ?? []);
    } catch (err) {
      report.skipped++;
      this.d.metrics.stuckRunSweepFailures.inc({ stage: 'undecodable_run', code: errorCode(err) });
      this.d.log.error(
        { code: 'stuck_run_skipped', runId, error: errorCode(err) },
        'run record does not decode: not checked by the stuck-run sweep',
      );
      return undefined;
    }
  }

  /**
   * A parent waiting on a child that ended (by `endedBy`) resumes now, not at its deadline: the child's process died
   * between its last commit and the promotion of its parent's wake job. Only the promotion is made here; the wake
   * job itself resumes the parent, fenced (wakeRun-5.lua), so a promotion made twice resumes it once. Counted
   * (`agent_child_runs_total{event="wake_recovered"}`), told on the parent's events (`wake_recovered`) and logged.
   */
  private async wakeParent(runId: string, endedBy: number): Promise<void> {
    // Woken already and waiting in its tenant's line for a slot (flow control): its admission releases the job.
    if ((await this.d.redis.hexists(this.d.keys.flow().waiting, runId)) === 1) return;
    if (!(await this.d.children?.wakeIfChildEnded(runId, endedBy))) return;
    const { redis, keys, cfg, metrics, log } = this.d;
    metrics.childRuns.inc({ event: 'wake_recovered', outcome: 'promoted' });
    await redis.xadd(
      keys.run(runId).events,
      'MAXLEN',
      '~',
      cfg.EVENTS_MAX_LEN,
      '*',
      'type',
      'wake_recovered',
      'data',
      JSON.stringify({ kind: 'child', by: 'stuck_run_sweep' }),
    );
    log.warn({ code: 'child_wake_recovered', runId }, "parent's wake job promoted by the sweep");
  }

  /**
   * A missing job re-created: a parked wait's wake job (its worker died between the commit and the add), due at the
   * wait's time, or at once when what it waits for already came (an event delivered, children ended), counted
   * (`agent_waits_total{outcome="job_recreated"}`); a running run's step job, at most MAX_JOB_RECREATIONS times. False: the run is to be settled.
   */
  private async recreated(runId: string, jobId: string, status: string): Promise<boolean> {
    const store = this.d.store;
    if (!store) return false;
    if (isWaitStatus(status)) {
      await store.ensureCurrentStepJob(runId);
      const kind = status === 'sleeping' ? 'sleep' : status === 'waiting_event' ? 'event' : 'child';
      this.d.metrics.waits.inc({ kind, outcome: 'job_recreated' });
      this.d.log.warn({ code: 'wake_job_recreated', runId, jobId }, 'wake job of a parked wait re-created');
      return true;
    }
    if (status !== 'running') return false;
    const times = await this.d.redis.hincrby(this.d.keys.run(runId).run, 'jobRecreations' satisfies RunField, 1);
    if (times > MAX_JOB_RECREATIONS) return false;
    await store.ensureCurrentStepJob(runId);
    this.d.metrics.stepJobsRecreated.inc();
    this.d.log.warn(
      { code: 'step_job_recreated', runId, jobId, times },
      'missing step job of a running run re-created',
    );
    return true;
  }
}

/** What the sweep makes of a run's current job (undefined: alive, waiting, delayed or active). */
function deadVerdict(
  exists: boolean,
  inFailed: boolean,
  inCompleted: boolean,
  failedReason: string | null,
): { jobState: DeadJobState; status: 'failed' | 'needs_human'; reason: string } | undefined {
  if (inFailed && exists) return { jobState: 'failed', ...classifyFailedReason(failedReason) };
  if (inCompleted && exists)
    return { jobState: 'completed', status: 'needs_human', reason: 'job_completed_without_commit' };
  if (!exists) return { jobState: 'missing', status: 'needs_human', reason: 'job_missing' };
  return undefined;
}

/** The replies in order; a command's error throws, or with `errors: 'each'` stands in the place of its reply. */
async function pipelined(
  redis: RedisClient,
  commands: (string | number)[][],
  errors: 'throw' | 'each' = 'throw',
): Promise<unknown[]> {
  const pipe = redis.pipeline(commands);
  const res = (await pipe.exec()) ?? [];
  return res.map(([err, v]) => {
    if (err && errors === 'throw') throw err;
    return err ?? v;
  });
}
