/**
 * Admission: a fleet shared fairly between tenants.
 *
 * A new run waits in its tenant's line (its step 1 job sits in BullMQ's delayed set until the
 * run's deadline, so the queue holds only admitted runs' steps). Runs are admitted in weighted
 * round-robin between the tenants' lines (flowAdmit-8.lua) while the tenant, the run's agent and
 * the fleet are under their concurrency limits; within a line, a higher priority goes first.
 * Admitting a run takes its slot and then promotes its step job to the queue. A slot is given
 * back (flowRelease-5.lua) when the run ends or parks; the next waiting runs are admitted then.
 *
 * What happens if a process dies:
 *  - after enqueue, before the run exists: an admission made in between (a slot freed by another
 *    process) finds no job to promote and leaves the run pending; the creator promotes it once it has
 *    created it (`created`). A run that still does not exist INTAKE_GRACE_MS after it was put in
 *    line never will (its creator died): the sweep gives its slot back;
 *  - after createRun, before enqueue: never, enqueue comes first;
 *  - after admitting, before promoting: the admission is `pending` under the admitter's connection
 *    (its owner name, src/store/owners.ts); the bookkeeping sweep of any worker sees that connection
 *    gone (the liveness the step jobs' owners are watched by, which a restart or a failover of Redis
 *    does not fool) and promotes the job (promote is idempotent);
 *  - after a run ended, before its release: the sweep reads the status of every run holding a slot
 *    and releases those no longer queued or running (release is idempotent);
 *  - a failover that loses one side of an admission (the slot on `{flow}`'s master, the promotion on the run's; or
 *    the run's place in line): the repair pass (src/flow/repair.ts) finds the disagreement with the run's own state
 *    and releases the job, or puts the run back in line; failing that, a run whose admission never comes still
 *    starts at its deadline and ends budget_exceeded (wall_clock), with its status, event and metric.
 * No path admits a run twice: taking it out of the line and taking its slot is one script.
 */
import type { Logger } from 'pino';
import { Job } from 'bullmq';
import { type RedisClient, nodeForKey } from '../store/connect.js';
import { type KeySpace, stepJobGeneration, stepJobId } from '../store/keys.js';
import { flowEnqueue, type FlowRun } from '../store/calls/flowEnqueue.js';
import { flowAdmit, type Admitted } from '../store/calls/flowAdmit.js';
import { flowRelease } from '../store/calls/flowRelease.js';
import { flowHold } from '../store/calls/flowHold.js';
import { flowWake, type WakeSlot } from '../store/calls/flowWake.js';
import { flowConfigure } from '../store/calls/flowConfigure.js';
import { promoteIfDelayed, type ShardQueues, STEP_JOB_NAME } from '../store/queues.js';
import type { Metrics } from '../metrics/metrics.js';
import { TerminalError } from '../core/errors.js';
import { flowWeightProblem } from '../core/flowWeight.js';
import { TENANT_NAME_FORMAT } from '../core/tenant.js';
import { AGENT_NAME_FORMAT } from '../core/agentName.js';
import { liveOwners, ownerOfConnection } from '../store/owners.js';
import { StepPriorities } from './stepPriority.js';
import { readRun } from '../store/runRecord.js';
import type { RunStatus } from '../core/status.js';
import { ownValue } from '../core/ownValue.js';

/** Priority levels of a run within its tenant's line: 0 (normal, the default) to 4 (most urgent). */
export const PRIORITY_LEVELS = 5;
export const MAX_PRIORITY = PRIORITY_LEVELS - 1;

/** What admission reads of the configuration (src/config/config.ts documents each). */
export interface FlowOptions {
  readonly FLOW_CONTROL: boolean;
  readonly FLOW_TENANT_CONCURRENCY: number;
  readonly FLOW_AGENT_CONCURRENCY: number;
  readonly FLOW_FLEET_CONCURRENCY: number;
  readonly FLOW_TENANT_WEIGHTS: Readonly<Record<string, number>>;
  readonly FLOW_TENANT_LIMITS: Readonly<Record<string, number>>;
  readonly FLOW_AGENT_LIMITS: Readonly<Record<string, number>>;
  readonly FLOW_SWEEP_MS: number;
  readonly FLOW_REPAIR_MS: number;
  readonly FLOW_STEP_PRIORITY: boolean;
  readonly FLOW_TENANT_MAX_WAITING: number;
  readonly FLOW_TENANT_WAITING_LIMITS: Readonly<Record<string, number>>;
}

export interface FlowDeps {
  redis: RedisClient;
  keys: KeySpace;
  queues: ShardQueues;
  cfg: FlowOptions;
  metrics: Metrics;
  log: Logger;
}

/**
 * A run's place in its line: priority level first (higher first), then arrival. Below 2^53 for any ms before year 2286.
 */
export function placeInLine(priority: number, at: number): number {
  return (MAX_PRIORITY - priority) * 1e13 + at;
}

/**
 * A woken run's place: ahead of every run not yet admitted (their places are >= 0), behind the runs of its tenant
 * woken before it (see `Admission.wake`).
 */
export function placeOfWoken(at: number): number {
  return at - 1e13;
}

/** What an operator may change at run time: a tenant's weight or limit, an agent's limit. */
export type FlowSetting = 'weight' | 'limit' | 'agent_limit' | 'max_waiting';
const SETTING_FIELD: Record<FlowSetting, string> = { weight: 'w', limit: 't', agent_limit: 'a', max_waiting: 'm' };

/**
 * The most admissions one script makes (a slot freed admits one; a sweep or a raised limit admits more, round by
 * round).
 */
const ADMIT_BATCH = 64;

/**
 * A run is put in line just before it is created (src/producer/intake.ts): a held run without a run hash younger than
 * this may be on its way, older it never will be.
 */
export const INTAKE_GRACE_MS = 60_000;

/**
 * How long a producer refused for a full line is asked to wait (Retry-After): the line drains at its tenant's
 * admissions, which nothing here can predict; long enough that a producer retrying on it does not spin.
 */
export const LINE_FULL_RETRY_AFTER_S = 30;

/**
 * A new run refused because its tenant's line already holds FLOW_TENANT_MAX_WAITING runs: nothing was written (no
 * line entry, no run). What bounds one producer's burst, so it cannot fill Redis for every tenant; the API answers it
 * 429 `tenant_line_full` with Retry-After.
 */
export class TenantLineFull extends Error {
  readonly code = 'tenant_line_full';
  constructor(
    readonly tenant: string,
    readonly limit: number,
  ) {
    super(`tenant ${tenant}'s line holds ${limit} runs waiting (FLOW_TENANT_MAX_WAITING): run refused`);
    this.name = 'TenantLineFull';
  }
}

/** What promoting an admitted run's step 1 job found: moved to the queue, already out of the delayed set, or no run. */
type Promotion = 'promoted' | 'not_delayed' | 'not_created';

export class Admission {
  private owner?: string;
  private readonly configured: Record<string, number>;
  private readonly steps: StepPriorities;

  constructor(private readonly d: FlowDeps) {
    const c = d.cfg;
    this.steps = new StepPriorities(c.FLOW_TENANT_WEIGHTS);
    this.configured = {
      ...prefixed('w:', c.FLOW_TENANT_WEIGHTS),
      ...prefixed('t:', c.FLOW_TENANT_LIMITS),
      ...prefixed('a:', c.FLOW_AGENT_LIMITS),
    };
  }

  get enabled(): boolean {
    return this.d.cfg.FLOW_CONTROL;
  }

  /**
   * Puts a run in its tenant's line (before the run is created: see the module comment). False: it was already known.
   * `limited`: a new run from outside (a producer, a schedule) is refused when its tenant's line holds
   * FLOW_TENANT_MAX_WAITING runs (TenantLineFull, nothing written); a child run is not (its parent is at work and
   * waits for it; its budget is the parent's).
   */
  async enqueue(
    run: { runId: string; tenant: string; agent: string; priority: number },
    now: number,
    limited = true,
  ): Promise<boolean> {
    const k = this.d.keys.flow();
    const meta: FlowRun = {
      tenant: run.tenant,
      agent: run.agent,
      shard: this.d.keys.shardOf(run.runId),
      priority: run.priority,
      at: now,
    };
    // The tenant's configured limit, else the fleet's; a limit set at run time (`m:<tenant>`) wins over both, read by
    // the script that puts the run in line.
    const maxWaiting = limited
      ? (ownValue(this.d.cfg.FLOW_TENANT_WAITING_LIMITS, run.tenant) ?? this.d.cfg.FLOW_TENANT_MAX_WAITING)
      : undefined;
    const line = this.d.keys.flowLine(run.tenant);
    const outcome = await flowEnqueue(
      this.d.redis,
      k,
      line,
      run.runId,
      meta,
      placeInLine(run.priority, now),
      maxWaiting,
    );
    if (typeof outcome === 'object') {
      // The limit that held: the tenant's own set at run time, else its configured one, else the fleet's.
      const limit = outcome.full;
      this.d.metrics.runsRefused.inc({ reason: 'tenant_line_full', tenant: run.tenant });
      this.d.log.warn(
        { code: 'tenant_line_full', tenant: run.tenant, agent: run.agent, limit },
        "a new run refused: its tenant's line is full",
      );
      throw new TenantLineFull(run.tenant, limit);
    }
    return outcome === 'queued';
  }

  /** The priority a run still waiting in its line was placed at; undefined when it is not waiting. */
  async waitingPriority(runId: string): Promise<number | undefined> {
    const raw = await this.d.redis.hget(this.d.keys.flow().waiting, runId);
    return raw === null ? undefined : (JSON.parse(raw) as FlowRun).priority;
  }

  /**
   * Admits waiting runs while the limits allow (rounds of ADMIT_BATCH) and releases each admitted
   * run's step job to the queue. Returns how many were admitted.
   */
  async admit(now = Date.now(), created?: string): Promise<number> {
    let total = 0;
    for (let round = 0; ; round++) {
      const admitted = await flowAdmit(this.d.redis, this.d.keys.flow(), {
        now,
        max: ADMIT_BATCH,
        owner: await this.ownOwner(),
        ...this.limits(),
        ...(round === 0 && created !== undefined ? { created } : {}),
      });
      await Promise.all(admitted.map((a) => this.start(a)));
      total += admitted.length;
      if (admitted.length < ADMIT_BATCH) return total;
    }
  }

  /**
   * The run now exists (its creator's intake is done): an admission another process made between enqueue and intake
   * found no job and left the run pending; its step 1 job is promoted here. Then whatever the limits allow is
   * admitted, as `admit` does, in the same request to Redis.
   */
  async created(runId: string, now = Date.now()): Promise<void> {
    await this.admit(now, runId);
  }

  /**
   * The run ended, parked or was cancelled: its slot back (or out of its line), then the next runs admitted. `byJobId`:
   * the job whose commit ended or parked it; a slot the run holds for a later job (it woke, or was resumed, before
   * this release came) is left alone.
   */
  async release(runId: string, byJobId?: string): Promise<void> {
    const gen = byJobId === undefined ? undefined : stepJobGeneration(byJobId);
    const r = await flowRelease(this.d.redis, this.d.keys.flow(), runId, false, gen);
    if (r !== 'none') await this.admit();
  }

  /**
   * A run woken from a wait asks for a slot for its wake job (flowWake-8.lua): `held` (taken now, admitted while it
   * waited, or the slot it parked with, whose release had not come yet), or `waiting` in its tenant's line. Its step
   * runs only once it holds one: a wait gave the slot back, so a wake is new work and counts against the tenant's,
   * the agent's and the fleet's limits like any; without this, any producer could put every run of a tenant to
   * work at once by delivering their events together.
   *
   * Where it waits, and why that is fair: at the front of its tenant's line, behind the runs of that tenant woken
   * before it, ahead of the runs not yet admitted. Within a tenant it arrived first: it was admitted before every run
   * still in that line, and finishing runs already started before starting new ones keeps a tenant's own burst from
   * holding its started runs half done (their waits' results, their effects) for as long as the burst lasts. Between
   * tenants it changes nothing: its tenant gets the slot only in its turn of the weighted round-robin, and the turn
   * is charged as an admission's is (its pass moves on by its stride), so a tenant whose runs wait and wake often
   * gets no more than its weight's share of the slots. A slot free under every limit with no woken run of the tenant
   * ahead is taken at once, its turn charged the same.
   */
  async wake(run: { runId: string; tenant: string; agent: string; jobId: string }, now: number): Promise<WakeSlot> {
    const meta: FlowRun = {
      tenant: run.tenant,
      agent: run.agent,
      shard: this.d.keys.shardOf(run.runId),
      priority: 0,
      at: now,
      jobId: run.jobId,
      gen: stepJobGeneration(run.jobId),
    };
    return flowWake(this.d.redis, this.d.keys.flow(), run.runId, meta, placeOfWoken(now), this.limits());
  }

  /**
   * The woken run's wake job is delayed now, to be released by its admission (`start`). An admission made between
   * the run's `wake` and that delay found the job still active and could not release it: if the run holds its slot
   * now, the job is released here. Then whatever the limits allow is admitted (a woken run put in line behind an
   * agent at its limit may be passed over while another agent's run fits).
   */
  async wokenWaits(run: { runId: string; jobId: string }): Promise<void> {
    const meta = await this.heldRun(run.runId);
    if (meta?.jobId === run.jobId) {
      // Not promoted: released already (its admitter promoted it meanwhile). A store error leaves the job delayed
      // for the repair sweep to release (`wake_retried`); it is named here, and the step goes on waiting for its slot.
      try {
        const job = await this.d.queues.byShard(meta.shard).getJob(run.jobId);
        if (job) await promoteIfDelayed(job);
      } catch (err) {
        this.d.log.warn(
          { code: 'flow_wake_release_failed', runId: run.runId, err },
          "woken run's job not released (the repair sweep will)",
        );
      }
      await this.d.redis.hdel(this.d.keys.flow().pending, run.runId);
    }
    await this.admit();
  }

  /**
   * Takes a run that still waits out of its line (a cancel): true when it was waiting, and then it
   * never started and holds no slot, so the caller may end it at once. A run at work is untouched.
   */
  async withdraw(runId: string): Promise<boolean> {
    return (await flowRelease(this.d.redis, this.d.keys.flow(), runId, true)) === 'withdrawn';
  }

  /**
   * Changes a tenant's weight, concurrency limit or waiting limit, or an agent's limit, at run time (null: back to
   * the configured value), recorded with who changed it; then admits what a raised limit allows.
   * Returns the previous run-time value ('' when there was none).
   */
  async configure(what: FlowSetting, of: string, value: number | null, who: string, now = Date.now()): Promise<string> {
    const problem = settingProblem(what, of, value);
    if (problem) throw new TerminalError('invalid_value', problem);
    const field = `${SETTING_FIELD[what]}:${of}`;
    const previous = await flowConfigure(this.d.redis, this.d.keys.flow(), field, {
      who,
      what,
      of,
      to: value === null ? '' : String(value),
      at: now,
    });
    this.d.log.info({ code: 'flow_setting_changed', what, of, value, who }, 'flow control setting changed');
    await this.admit(now);
    return previous;
  }

  /**
   * A run admitted before comes back to work by a person's decision (resumed, retried, continued): it takes a slot at
   * once (flowHold-3.lua), for the job it was given (the run's `jobId`), so a release still on its way from the commit
   * that parked or stopped it frees nothing.
   */
  async hold(run: { runId: string; tenant: string; agent: string }, now: number): Promise<boolean> {
    const jobId = (await readRun(this.d.redis, this.d.keys, run.runId, ['jobId']))?.jobId;
    const meta: FlowRun = {
      tenant: run.tenant,
      agent: run.agent,
      shard: this.d.keys.shardOf(run.runId),
      priority: 0,
      at: now,
      admittedAt: now,
      ...(jobId ? { jobId, gen: stepJobGeneration(jobId) } : {}),
    };
    return flowHold(this.d.redis, this.d.keys.flow(), run.runId, meta);
  }

  /**
   * The BullMQ priority of a tenant's next step job (src/flow/stepPriority.ts), from the shares last read by a sweep;
   * 0 (a standard job) at level 1, or with flow control or FLOW_STEP_PRIORITY off.
   */
  stepPriority(tenant: string): number {
    return this.enabled && this.d.cfg.FLOW_STEP_PRIORITY ? this.steps.of(tenant) : 0;
  }

  /** Reads every tenant's runs at work and run-time weight (one request) into the step priorities. */
  async refreshStepPriorities(): Promise<void> {
    const k = this.d.keys.flow();
    const [counts, settings] = (await this.d.redis.pipeline().hgetall(k.counts).hgetall(k.settings).exec()) ?? [];
    const failed = counts?.[0] ?? settings?.[0];
    if (failed) throw failed;
    this.steps.update({
      counts: (counts?.[1] ?? {}) as Record<string, string>,
      settings: (settings?.[1] ?? {}) as Record<string, string>,
    });
  }

  /**
   * Bookkeeping, every FLOW_SWEEP_MS in every worker (several racing are safe: each script is
   * idempotent): admissions whose admitter's connection is gone get their job promoted; slots of
   * runs no longer queued or running are released; then whatever the limits allow is admitted
   * (a limit raised at run time takes effect here). First, the tenants' shares are read again for the step
   * priorities.
   */
  async sweep(): Promise<{ promoted: number; released: number; admitted: number }> {
    await this.refreshStepPriorities();
    const k = this.d.keys.flow();
    const pending = await this.d.redis.hgetall(k.pending);
    const owners = [...new Set(Object.values(pending))];
    let promoted = 0;
    if (owners.length > 0) {
      const node = await nodeForKey(this.d.redis, k.pending);
      const alive = await liveOwners(node, owners);
      for (const [runId, owner] of Object.entries(pending)) {
        if (alive.has(owner)) continue;
        const meta = await this.heldRun(runId);
        if (meta) {
          await this.start({ runId, shard: meta.shard, tenant: meta.tenant, ...jobOf(meta) });
          promoted++;
        }
      }
    }
    const held = Object.entries(await this.d.redis.hgetall(k.held));
    const runs = await Promise.all(held.map(([runId]) => readRun(this.d.redis, this.d.keys, runId, ['jobId'])));
    let released = 0;
    for (let i = 0; i < held.length; i++) {
      const run = runs[i];
      const [runId, raw] = held[i]!;
      const meta = JSON.parse(raw) as FlowRun;
      if (!slotIdle(run?.status, run?.jobId, meta)) continue;
      if (run === undefined && Date.now() - meta.at < INTAKE_GRACE_MS) continue;
      // Released for the job it was read for: taken since for a later one (the run woke), it is left alone.
      if ((await flowRelease(this.d.redis, k, runId, false, meta.gen ?? [0, 0])) === 'released') released++;
    }
    if (released > 0)
      this.d.log.info({ code: 'flow_slots_recovered', released }, 'slots of runs no longer at work released');
    const admitted = await this.admit();
    return { promoted, released, admitted };
  }

  /**
   * Releases the job of a run that holds its slot (its admission's promotion, again): what the repair pass
   * (src/flow/repair.ts) does for a held run whose job still waits in the delayed set. Idempotent, as promote is.
   * True when the job moved to the queue now.
   */
  async releaseHeld(runId: string): Promise<boolean> {
    const meta = await this.heldRun(runId);
    if (!meta) return false;
    return (await this.start({ runId, shard: meta.shard, tenant: meta.tenant, ...jobOf(meta) })) === 'promoted';
  }

  private async heldRun(runId: string): Promise<FlowRun | undefined> {
    const raw = await this.d.redis.hget(this.d.keys.flow().held, runId);
    return raw === null ? undefined : (JSON.parse(raw) as FlowRun);
  }

  /**
   * Releases an admitted run's step 1 job from the delayed set to the queue, then clears its pending mark. A job that
   * is not delayed any more (promoted already, or started at its deadline) is left as it is. A run that does not exist
   * yet stays pending: its creator promotes it (`created`), or, past INTAKE_GRACE_MS, its slot is given back.
   */
  private async start(a: Admitted): Promise<Promotion> {
    const promotion = await this.promote(a);
    if (promotion === 'not_created') {
      const meta = await this.heldRun(a.runId);
      if (meta && Date.now() - meta.at < INTAKE_GRACE_MS) return promotion;
      await flowRelease(this.d.redis, this.d.keys.flow(), a.runId);
      this.d.log.warn(
        { code: 'flow_admitted_missing_run', runId: a.runId },
        'admitted run does not exist: slot released',
      );
      return promotion;
    }
    await this.d.redis.hdel(this.d.keys.flow().pending, a.runId);
    if (promotion === 'promoted') this.d.metrics.flowAdmitted.inc({ tenant: a.tenant });
    return promotion;
  }

  /**
   * With FLOW_STEP_PRIORITY the job is given its tenant's step priority first (the share after this admission): a
   * tenant with its whole burst admitted (no limit) then does not fill the wait list, which BullMQ serves before any
   * prioritized job, ahead of every other tenant's steps. If the process dies between the two, the job is delayed
   * with its priority set, and the sweep promotes it.
   */
  private async promote(a: Admitted): Promise<Promotion> {
    const jobId = a.jobId ?? stepJobId(a.runId, 1);
    const queue = this.d.queues.byShard(a.shard);
    const job = new Job(queue, STEP_JOB_NAME, {}, {}, jobId);
    // A woken run's wake job goes to the wait list, as a woken step's job always does (src/flow/stepPriority.ts).
    const priority = a.jobId ? 0 : this.firstStepPriority(a);
    const release = async (): Promise<boolean> => {
      if (priority > 0) await job.changePriority({ priority });
      return promoteIfDelayed(job);
    };
    // Not promoted: a job not created yet and one promoted already get the same answer from BullMQ; its state says.
    if (await release().catch(() => false)) return 'promoted';
    let state = await queue.getJobState(jobId);
    if (state === 'unknown') {
      if (!(await this.d.redis.exists(this.d.keys.run(a.runId).run))) return 'not_created';
      // The run and its job are created together (createRun-14.lua, one change): created between the two
      // reads. Read once more: answering `not_delayed` here would clear the pending mark the creator's `created`
      // looks for, and the job would stay delayed until the run's deadline.
      state = await queue.getJobState(jobId);
    }
    // Created between the attempt and the check (the creator's intake): once more. Another process (the repair
    // sweep, another admission) may promote it between this read and the promotion: not_delayed then.
    if (state === 'delayed') return (await release()) ? 'promoted' : 'not_delayed';
    return 'not_delayed';
  }

  private firstStepPriority(a: Admitted): number {
    if (!this.enabled || !this.d.cfg.FLOW_STEP_PRIORITY) return 0;
    if (a.held === undefined || a.weight === undefined) return this.steps.of(a.tenant);
    this.steps.note(a.tenant, a.held, a.weight);
    return this.steps.of(a.tenant);
  }

  /** The weights and limits every script that gives a slot reads (a run-time setting wins over them). */
  private limits() {
    return {
      defaultWeight: 1,
      configured: this.configured,
      tenantLimit: this.d.cfg.FLOW_TENANT_CONCURRENCY,
      agentLimit: this.d.cfg.FLOW_AGENT_CONCURRENCY,
      fleetLimit: this.d.cfg.FLOW_FLEET_CONCURRENCY,
    };
  }

  /** The owner name of the connection that runs the flow scripts (the node of `{flow}` on a Cluster). */
  private async ownOwner(): Promise<string> {
    if (this.owner === undefined) {
      const node = await nodeForKey(this.d.redis, this.d.keys.flow().pending);
      this.owner = await ownerOfConnection(node);
    }
    return this.owner;
  }

  /** Forgets the cached owner (after a reconnection: admissions made under the old one are promoted by a sweep). */
  forgetOwner(): void {
    this.owner = undefined;
  }
}

/**
 * Why a setting is refused (a weight from 0.001 to 1000, src/core/flowWeight.ts; a limit a whole number >= 0; a name
 * like a tenant's), or undefined. The message starts with the field it names.
 */
export function settingProblem(what: FlowSetting, of: string, value: number | null): string | undefined {
  if (what === 'agent_limit' && !AGENT_NAME_FORMAT.test(of))
    return 'agent: an agent name: a-z, then up to 62 of a-z, 0-9, _ or -';
  if (what !== 'agent_limit' && !TENANT_NAME_FORMAT.test(of)) return 'tenant: 1-63 letters, digits, _ or -';
  if (value === null) return undefined;
  if (what === 'weight') return flowWeightProblem(value);
  const field = what === 'max_waiting' ? 'maxWaiting' : 'limit';
  return Number.isInteger(value) && value >= 0 ? undefined : `${field}: a whole number >= 0 (0 = no limit)`;
}

/**
 * Whether a held slot serves no run at work, for the sweep to release: its run is neither queued nor running, nor
 * parked on a wait with the slot taken for its current (wake) job, admitted and about to run.
 */
function slotIdle(status: RunStatus | undefined, jobId: string | undefined, meta: FlowRun): boolean {
  if (status === 'queued' || status === 'running') return false;
  return !(status !== undefined && PARKED_ON_WAIT.has(status) && jobId !== undefined && meta.jobId === jobId);
}

/** The statuses of a run parked on a wait (src/runs/waits.ts, a layer above this one, names them too). */
export const PARKED_ON_WAIT: ReadonlySet<RunStatus> = new Set<RunStatus>([
  'sleeping',
  'waiting_event',
  'waiting_child',
]);

/** A held run's job to release, when it is not its step 1 job. */
function jobOf(meta: FlowRun): { jobId?: string } {
  return meta.jobId ? { jobId: meta.jobId } : {};
}

function prefixed(prefix: string, values: Readonly<Record<string, number>>): Record<string, number> {
  return Object.fromEntries(Object.entries(values).map(([k, v]) => [prefix + k, v]));
}
