/**
 * Flow control's state healed from the runs' own.
 *
 * Flow control's keys share one hash tag (`{flow}`), each run's keys and step queue another (its shard): on a
 * Cluster they live on different masters, and an admission writes both, the slot first (flowAdmit-8.lua, on `{flow}`),
 * then the run's job out of the delayed set (on the run's shard). A failover that promotes a replica which had not
 * received the latest writes of one of the two masters (acknowledged writes are lost, docs/failover.md) leaves them
 * disagreeing, and no script can see both sides. What a lost write leaves, and what this pass does about it:
 *  - a run that holds a slot (the `{flow}` side survived) whose job is still delayed until the run's deadline (the
 *    promotion was lost, or failed against the dying master while its pending mark names a connection still alive,
 *    which the sweep leaves to its admitter): the job is released again (`job_released`);
 *  - a run waiting for admission (queued, its step 1 job delayed until its deadline) in no line and holding no slot
 *    (its enqueue was lost with `{flow}`'s master): put back in its tenant's line at its first place (`requeued`);
 *  - a woken run whose wake job was delayed to the deadline to wait for a slot, in no line: its wake job runs again
 *    and asks for its slot anew (`wake_retried`);
 *  - a line entry whose run has ended, or never came to exist (`line_entry_removed`);
 *  - a slot counter that disagrees with the slots held (`count_recomputed`, flowRecount-2.lua).
 * A slot held by a run no longer at work is the sweep's (src/flow/admission.ts), every FLOW_SWEEP_MS.
 *
 * Each repair is counted (`agent_flow_repairs_total{repair}`) and logged (`flow_repaired`, with the run). The pass
 * runs in one worker per FLOW_REPAIR_MS (a lease on `{flow}`; a worker that dies holding it only skips a period), and
 * touches only state older than FLOW_REPAIR_MS: a younger admission may still be under way. Every repair is idempotent
 * and checked again by the script it calls, so a pass racing an admission, a release or another pass is safe: at
 * worst a job already promoted is promoted again (nothing happens) or a run re-enters a line it just left, which its
 * admission then finds at work and lets go by the sweep.
 * Without it, each of these runs still starts at its deadline and ends budget_exceeded (wall_clock), loudly.
 */
import { randomBytes } from 'node:crypto';
import { type RunStatus, isTerminal } from '../core/status.js';
import { delayedUntil } from '../store/bullmqInternals.js';
import { flowEnqueue, type FlowRun } from '../store/calls/flowEnqueue.js';
import { flowRecount } from '../store/calls/flowRecount.js';
import { flowRelease } from '../store/calls/flowRelease.js';
import { stepJobId } from '../store/keys.js';
import { promoteIfDelayed } from '../store/queues.js';
import { readBudget, readRun } from '../store/runRecord.js';
import { INTAKE_GRACE_MS, PARKED_ON_WAIT, placeInLine, type Admission, type FlowDeps } from './admission.js';

export type FlowRepairKind = 'job_released' | 'requeued' | 'wake_retried' | 'line_entry_removed' | 'count_recomputed';
export type FlowRepairReport = Record<FlowRepairKind, number>;

/** Runs of one status and shard (or line entries) looked at per pass: the rest in the next passes. */
const BATCH = 500;

export class FlowRepair {
  /** Where the last pass stopped in each listing (`<shard>:<status>`, or the waiting hash's HSCAN cursor). */
  private readonly offsets = new Map<string, number>();
  private waitingCursor = '0';

  constructor(private readonly d: FlowDeps & { admission: Admission }) {}

  /** One pass if no other worker took this period's lease; undefined when another did. */
  async tick(now = Date.now()): Promise<FlowRepairReport | undefined> {
    const lease = await this.d.redis.set(
      this.d.keys.flow().repairLease,
      randomBytes(6).toString('hex'),
      'PX',
      this.d.cfg.FLOW_REPAIR_MS,
      'NX',
    );
    return lease === 'OK' ? this.pass(now) : undefined;
  }

  /** Every repair once over (a bounded slice of each listing); then admits what the repairs allow. */
  async pass(now = Date.now()): Promise<FlowRepairReport> {
    const report: FlowRepairReport = {
      job_released: 0,
      requeued: 0,
      wake_retried: 0,
      line_entry_removed: 0,
      count_recomputed: 0,
    };
    const olderThan = now - this.d.cfg.FLOW_REPAIR_MS;
    for (const c of await flowRecount(this.d.redis, this.d.keys.flow()))
      this.repaired(report, 'count_recomputed', { field: c.field, counted: c.counted, held: c.held });
    await this.releaseHeldJobs(report, olderThan);
    await this.removeEndedEntries(report, now);
    for (const shard of this.d.keys.allShards()) await this.requeueShard(report, shard, olderThan);
    if (report.requeued + report.line_entry_removed + report.count_recomputed > 0) await this.d.admission.admit(now);
    return report;
  }

  /** Held runs whose job is still delayed until their deadline: the promotion, again. */
  private async releaseHeldJobs(report: FlowRepairReport, olderThan: number): Promise<void> {
    const held = Object.entries(await this.d.redis.hgetall(this.d.keys.flow().held))
      .map(([runId, raw]) => ({ runId, meta: JSON.parse(raw) as FlowRun }))
      .filter(({ meta }) => (meta.admittedAt ?? meta.at) <= olderThan);
    for (const { runId, meta } of held) {
      const jobId = meta.jobId ?? stepJobId(runId, 1);
      const run = await readRun(this.d.redis, this.d.keys, runId, ['jobId']);
      if (!run || run.jobId !== jobId || !(run.status === 'queued' || isParked(run.status))) continue;
      if (!(await this.delayedToDeadline(runId, meta.shard, jobId))) continue;
      if (await this.d.admission.releaseHeld(runId)) this.repaired(report, 'job_released', { runId, jobId });
    }
  }

  /** Line entries of runs that ended (or never came to exist): out of their line. */
  private async removeEndedEntries(report: FlowRepairReport, now: number): Promise<void> {
    const k = this.d.keys.flow();
    const [cursor, flat] = await this.d.redis.hscan(k.waiting, this.waitingCursor, 'COUNT', BATCH);
    this.waitingCursor = cursor;
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const runId = flat[i]!;
      const meta = JSON.parse(flat[i + 1]!) as FlowRun;
      const run = await readRun(this.d.redis, this.d.keys, runId, []);
      const ended = run ? isTerminal(run.status) : now - meta.at > INTAKE_GRACE_MS;
      if (!ended) continue;
      if ((await flowRelease(this.d.redis, k, runId, true)) === 'withdrawn')
        this.repaired(report, 'line_entry_removed', { runId, status: run?.status ?? 'missing' });
    }
  }

  /** Runs of one shard waiting for admission (queued, or woken and waiting for a slot) in no line and holding none. */
  private async requeueShard(report: FlowRepairReport, shard: number, olderThan: number): Promise<void> {
    for (const status of ['queued', ...PARKED_ON_WAIT] as RunStatus[]) {
      const ids = await this.slice(shard, status, olderThan);
      const unknown = await this.inNoLine(ids);
      if (unknown.length === 0) continue;
      const runs = await Promise.all(
        unknown.map((runId) =>
          readRun(this.d.redis, this.d.keys, runId, ['jobId', 'tenant', 'agent', 'createdAt', 'spec', 'wait']),
        ),
      );
      for (const [i, runId] of unknown.entries()) {
        const run = runs[i];
        if (!run?.jobId || run.status !== status) continue;
        if (!(await this.delayedToDeadline(runId, shard, run.jobId, waitAt(run.wait)))) continue;
        if (status === 'queued') {
          if (await this.requeue(runId, shard, run)) this.repaired(report, 'requeued', { runId });
        } else if (await this.retryWake(shard, run.jobId)) {
          this.repaired(report, 'wake_retried', { runId, jobId: run.jobId });
        }
      }
    }
  }

  /**
   * The next BATCH runs of a status on a shard, changed before `olderThan`; from the start again after the last.
   */
  private async slice(shard: number, status: RunStatus, olderThan: number): Promise<string[]> {
    const at = `${shard}:${status}`;
    const offset = this.offsets.get(at) ?? 0;
    const key = this.d.keys.runsByStatus(shard, status);
    const ids = await this.d.redis.zrangebyscore(key, '-inf', olderThan, 'LIMIT', offset, BATCH);
    this.offsets.set(at, ids.length < BATCH ? 0 : offset + ids.length);
    return ids;
  }

  /** The runs in neither the waiting nor the held hash (read together, one MULTI: an admission moves it between them). */
  private async inNoLine(runIds: readonly string[]): Promise<string[]> {
    if (runIds.length === 0) return [];
    const k = this.d.keys.flow();
    const res = await this.d.redis
      .multi()
      .hmget(k.waiting, ...runIds)
      .hmget(k.held, ...runIds)
      .exec();
    const [waiting, held] = (res ?? []).map(([err, v]) => {
      if (err) throw err;
      return v as (string | null)[];
    });
    return runIds.filter((_, i) => waiting?.[i] === null && held?.[i] === null);
  }

  /**
   * Whether the run's job waits in the delayed set until its deadline or later (where admission left it: deferNewJob,
   * takeWakeSlot), and, for a parked run, past its wait's own time (a wait that times out at the deadline is
   * indistinguishable from waiting for a slot, and is left to its deadline).
   */
  private async delayedToDeadline(runId: string, shard: number, jobId: string, waitsUntil?: number): Promise<boolean> {
    const [due] = await delayedUntil(this.d.redis, `${this.d.keys.queueKeyPrefix(shard)}delayed`, [jobId]);
    if (due === undefined) return false;
    const { deadlineAt } = await readBudget(this.d.redis, this.d.keys, runId, ['deadlineAt']);
    return due >= deadlineAt && (waitsUntil === undefined || waitsUntil < deadlineAt);
  }

  /** A queued run back in its tenant's line, at the place its creation gave it. */
  private async requeue(
    runId: string,
    shard: number,
    run: { tenant: string; agent: string; createdAt: number; spec?: string | undefined },
  ): Promise<boolean> {
    const priority = priorityOf(run.spec);
    const meta: FlowRun = { tenant: run.tenant, agent: run.agent, shard, priority, at: run.createdAt };
    const line = this.d.keys.flowLine(run.tenant);
    // No limit checked: the run exists already, it only gets back the place its creation gave it.
    const place = placeInLine(priority, run.createdAt);
    return (await flowEnqueue(this.d.redis, this.d.keys.flow(), line, runId, meta, place)) === 'queued';
  }

  /** The wake job out of the delayed set: it asks for its slot again (src/worker/step/wakeSlot.ts). */
  private async retryWake(shard: number, jobId: string): Promise<boolean> {
    const job = await this.d.queues.byShard(shard).getJob(jobId);
    // False: not delayed any more, it runs already. A store error fails the sweep, which says so (next tick retries).
    return job ? promoteIfDelayed(job) : false;
  }

  private repaired(report: FlowRepairReport, repair: FlowRepairKind, detail: Record<string, unknown>): void {
    report[repair]++;
    this.d.metrics.flowRepairs.inc({ repair });
    this.d.log.warn({ code: 'flow_repaired', repair, ...detail }, 'flow control state repaired from the run');
  }
}

const isParked = (status: RunStatus): boolean => PARKED_ON_WAIT.has(status);

/** The run's place-in-line priority, from its spec (0 when it names none). */
function priorityOf(spec: string | undefined): number {
  if (!spec) return 0;
  const p = (JSON.parse(spec) as { priority?: unknown }).priority;
  return typeof p === 'number' ? p : 0;
}

/** The due time of a parked run's wait (its JSON's `at`, src/runs/waits.ts). */
function waitAt(wait: string | undefined): number | undefined {
  if (!wait) return undefined;
  const at = (JSON.parse(wait) as { at?: unknown }).at;
  return typeof at === 'number' ? at : undefined;
}
