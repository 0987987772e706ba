/**
 * Schedules: an agent started on a cron pattern, per tenant, through BullMQ's job schedulers.
 *
 * A schedule's definition is kept in one hash (`KeySpace.schedules`), paused ones included; its
 * live form is a BullMQ job scheduler on the `schedules` queue, which makes one job per tick
 * (its id names the tick, so every process that upserts or ticks it makes the same job). The
 * tick's job starts a run whose intake event is `schedule:<id>:<tick ms>`: the run id derives
 * from it (src/producer/intake.ts), so a tick delivered twice, or by two processes, is one run.
 * Pausing removes the job scheduler and keeps the definition; resuming upserts it again (BullMQ
 * has no pause of one scheduler). The same input each tick is the same subject: each tick's run
 * is a follow-up of the previous one (it waits for it and its model sees that conversation).
 *
 * Bounds: a tenant holds at most SCHEDULES_MAX_PER_TENANT schedules (counted and written in one script,
 * putSchedule-1.lua), and a pattern may not tick more often than SCHEDULE_MIN_INTERVAL_MS. A tick fires only while
 * the credential that made the schedule is still configured (src/producer/scheduleOwner.ts); otherwise the tick
 * pauses it `credential_revoked`, starts nothing, and says so (log code, metric).
 */
import { Queue, Worker, type Job } from 'bullmq';
import { CronExpressionParser } from 'cron-parser';
import { z } from 'zod';
import type { EngineContext } from '../runs/engineContext.js';
import { settledWithin } from '../core/timeout.js';
import { tenantNameSchema } from '../core/tenant.js';
import { agentNameSchema, budgetRequestSchema } from './schemas.js';
import { InvalidRunRequest, buildSpec, startRun } from './intake.js';
import { putSchedule } from '../store/calls/putSchedule.js';
import { ownerOf, ownerStillValid, scheduleOwnerSchema, type ScheduleActor } from './scheduleOwner.js';

export const SCHEDULE_ID = /^[A-Za-z0-9_.-]{1,64}$/;

/** PUT /v1/schedules/:id: what runs and when (`cron`: five or six fields, `tz` an IANA zone, UTC by default). */
export const scheduleBodySchema = z
  .object({
    tenant: tenantNameSchema('tenant must be 1-63 letters, digits, _ or -'),
    agent: agentNameSchema,
    cron: z.string().min(1).max(120).refine(validCron, 'not a cron pattern (five or six fields)'),
    tz: z.string().min(1).max(64).refine(validZone, 'not an IANA time zone').optional(),
    input: z.unknown(),
    budget: budgetRequestSchema.optional(),
  })
  .strict();
export type ScheduleBody = z.infer<typeof scheduleBodySchema>;

/** Why a schedule is paused when no person paused it. */
export const CREDENTIAL_REVOKED = 'credential_revoked';

const definitionSchema = scheduleBodySchema.extend({
  id: z.string().regex(SCHEDULE_ID),
  paused: z.boolean(),
  /** Set when the schedule paused itself (CREDENTIAL_REVOKED); a person's pause has none. */
  pausedReason: z.literal(CREDENTIAL_REVOKED).optional(),
  /** Whose authority it fires on; absent on definitions stored before owners were kept (the producer's). */
  owner: scheduleOwnerSchema.optional(),
});
export type Schedule = z.infer<typeof definitionSchema>;

/** A schedule as the API shows it (and /openapi.json describes it): its owner's kind, never the fingerprint. */
export const scheduleViewSchema = definitionSchema
  .omit({ owner: true })
  .extend({
    createdBy: z.enum(['producer', 'tenant']).meta({ description: 'Whose credential it fires on' }),
    nextTickAt: z.number().int().optional().meta({ description: 'Epoch ms of the next tick; absent while paused' }),
  })
  .meta({ id: 'Schedule' });
export type ScheduleView = z.infer<typeof scheduleViewSchema>;

export function scheduleView(s: Schedule, nextTickAt?: number): ScheduleView {
  const { owner, ...rest } = s;
  return { ...rest, createdBy: owner?.kind ?? 'producer', ...(nextTickAt !== undefined ? { nextTickAt } : {}) };
}

/**
 * The tenant already holds SCHEDULES_MAX_PER_TENANT schedules: a 409 naming `tenant`, nothing written. The setting's
 * name is the producer's to see (`messageFor`), as a 400's configuration is.
 */
export class ScheduleLimitReached extends Error {
  readonly code = 'schedule_limit';
  constructor(readonly max: number) {
    super(`a tenant holds at most ${max} schedules: delete one first`);
  }

  messageFor(seesDeployment: boolean): string {
    return seesDeployment ? `${this.message} (SCHEDULES_MAX_PER_TENANT)` : this.message;
  }
}

const DAY_S = 86_400;

/**
 * The shortest time two ticks of `pattern` can be apart, in ms: from the times of day its second, minute and hour
 * fields allow (midnight included, as if every day matched), so a lower bound whatever its day fields say.
 */
export function minTickGapMs(pattern: string): number {
  const { second, minute, hour } = CronExpressionParser.parse(pattern, { tz: 'UTC' }).fields;
  const times: number[] = [];
  for (const h of hour.values)
    for (const m of minute.values) for (const sec of second.values) times.push(h * 3600 + m * 60 + sec);
  times.sort((a, b) => a - b);
  let gap = DAY_S - times[times.length - 1]! + times[0]!;
  for (let i = 1; i < times.length; i++) gap = Math.min(gap, times[i]! - times[i - 1]!);
  return gap * 1000;
}

/** A tick job's data: which schedule (its definition is read at the tick, so an edit applies to the next one). */
const tickDataSchema = z.object({ tenant: z.string(), id: z.string() }).strict();

function validCron(pattern: string): boolean {
  try {
    CronExpressionParser.parse(pattern, { tz: 'UTC' });
    return true;
  } catch {
    return false;
  }
}

function validZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

export function isScheduleId(id: string): boolean {
  return SCHEDULE_ID.test(id);
}

const schedulerId = (tenant: string, id: string): string => `${tenant}:${id}`;

export class Schedules {
  private made: Queue | undefined;

  constructor(private readonly ctx: EngineContext) {}

  /**
   * Made on first use: BullMQ writes a queue's meta keys when it is constructed, and an API that never schedules writes
   * none.
   */
  get queue(): Queue {
    if (!this.made) {
      this.made = new Queue(this.ctx.keys.schedulesQueueName(), {
        connection: this.ctx.redis,
        prefix: this.ctx.keys.bullPrefix,
      });
      this.made.on('error', (err) =>
        this.ctx.log.warn({ code: 'schedules_queue_error', err }, 'schedules queue error'),
      );
    }
    return this.made;
  }

  /**
   * Creates or replaces a schedule (kept paused if it was). The agent and its input are checked
   * as a run request would be (an InvalidRunRequest names the field); nothing is written then.
   */
  async put(id: string, body: ScheduleBody, actor: ScheduleActor): Promise<Schedule> {
    buildSpec(
      this.ctx,
      { tenant: body.tenant, agent: body.agent, input: body.input, ...(body.budget ? { budget: body.budget } : {}) },
      Date.now(),
    );
    const minMs = this.ctx.cfg.SCHEDULE_MIN_INTERVAL_MS;
    const gap = minTickGapMs(body.cron);
    if (gap < minMs)
      throw new InvalidRunRequest([
        {
          path: 'cron',
          message: `ticks can be ${gap} ms apart; at least ${minMs}`,
          deployment: 'SCHEDULE_MIN_INTERVAL_MS',
        },
      ]);
    const previous = await this.get(body.tenant, id);
    // A person's pause is kept; a pause for a revoked credential ends with a PUT, which brings a valid one.
    const paused = previous?.paused === true && previous.pausedReason === undefined;
    const schedule: Schedule = { ...body, id, paused, owner: ownerOf(actor) };
    const put = await putSchedule(
      this.ctx.redis,
      { definitions: this.ctx.keys.schedules() },
      {
        tenant: body.tenant,
        id,
        definition: JSON.stringify(schedule),
        maxPerTenant: this.ctx.cfg.SCHEDULES_MAX_PER_TENANT,
      },
    );
    if (put === 'limit') throw new ScheduleLimitReached(this.ctx.cfg.SCHEDULES_MAX_PER_TENANT);
    if (!schedule.paused) await this.upsertScheduler(schedule);
    return schedule;
  }

  async get(tenant: string, id: string): Promise<Schedule | undefined> {
    const raw = await this.ctx.redis.hget(this.ctx.keys.schedules(), schedulerId(tenant, id));
    return raw === null ? undefined : definitionSchema.parse(JSON.parse(raw));
  }

  /** Every schedule of the tenants `sees` accepts, with its next tick (undefined while paused). */
  async list(sees: (tenant: string) => boolean = () => true): Promise<ScheduleView[]> {
    const all = await this.ctx.redis.hgetall(this.ctx.keys.schedules());
    const out: ScheduleView[] = [];
    for (const raw of Object.values(all)) {
      const s = definitionSchema.parse(JSON.parse(raw));
      if (!sees(s.tenant)) continue;
      const live = s.paused ? undefined : await this.queue.getJobScheduler(schedulerId(s.tenant, s.id));
      out.push(scheduleView(s, live?.next !== undefined ? Number(live.next) : undefined));
    }
    return out.sort((a, b) => `${a.tenant}:${a.id}`.localeCompare(`${b.tenant}:${b.id}`));
  }

  /**
   * Pauses (removes the job scheduler, keeps the definition) or resumes. A resume by `actor` makes the schedule fire
   * on that actor's credential from then on (a tenant takes back a schedule its revoked token made). Undefined when
   * there is no such schedule.
   */
  async setPaused(tenant: string, id: string, paused: boolean, actor?: ScheduleActor): Promise<Schedule | undefined> {
    const s = await this.get(tenant, id);
    if (!s) return undefined;
    const { pausedReason: _, ...rest } = s;
    const next: Schedule = { ...rest, paused, ...(!paused && actor ? { owner: ownerOf(actor) } : {}) };
    await this.ctx.redis.hset(this.ctx.keys.schedules(), schedulerId(tenant, id), JSON.stringify(next));
    if (paused) await this.queue.removeJobScheduler(schedulerId(tenant, id));
    else await this.upsertScheduler(next);
    return next;
  }

  /** A tick found the schedule's credential revoked: paused, with the reason, until a PUT or resume brings one. */
  async pauseRevoked(s: Schedule): Promise<void> {
    const next: Schedule = { ...s, paused: true, pausedReason: CREDENTIAL_REVOKED };
    await this.ctx.redis.hset(this.ctx.keys.schedules(), schedulerId(s.tenant, s.id), JSON.stringify(next));
    await this.queue.removeJobScheduler(schedulerId(s.tenant, s.id));
  }

  /** False, with nothing written, when there is no such schedule (the queue's first use would write its meta keys). */
  async remove(tenant: string, id: string): Promise<boolean> {
    if (!(await this.ctx.redis.hexists(this.ctx.keys.schedules(), schedulerId(tenant, id)))) return false;
    await this.queue.removeJobScheduler(schedulerId(tenant, id));
    return (await this.ctx.redis.hdel(this.ctx.keys.schedules(), schedulerId(tenant, id))) > 0;
  }

  private async upsertScheduler(s: Schedule): Promise<void> {
    await this.queue.upsertJobScheduler(
      schedulerId(s.tenant, s.id),
      { pattern: s.cron, tz: s.tz ?? 'UTC' },
      {
        name: 'tick',
        data: { tenant: s.tenant, id: s.id },
        // A tick that fails (the store failing over, a replica wait short) is tried again: its run's idempotency key
        // (`schedule:<id>:<tick time>`) makes a retry start the same run at most once. One that fails every attempt
        // is counted `failed`, logged and alerted on (startScheduleWorker).
        opts: {
          attempts: TICK_ATTEMPTS,
          backoff: { type: 'exponential', delay: TICK_BACKOFF_MS },
          removeOnComplete: { count: 100 },
          removeOnFail: { count: 1000 },
        },
      },
    );
  }

  async close(): Promise<void> {
    await this.made?.close();
  }
}

/**
 * The tick's time: BullMQ gives each scheduler job the time it was scheduled for (`prevMillis`
 * in 6.x, also in its id `repeat:<scheduler>:<ms>`); its creation time plus delay otherwise.
 */
export function tickTimeOf(job: Pick<Job, 'opts' | 'timestamp' | 'delay' | 'id'>): number {
  const prev = (job.opts as { prevMillis?: number }).prevMillis;
  if (typeof prev === 'number' && prev > 0) return prev;
  const fromId = /:(\d+)$/.exec(job.id ?? '')?.[1];
  return fromId !== undefined ? Number(fromId) : job.timestamp + (job.delay ?? 0);
}

/**
 * Starts the run of one tick. A schedule removed, paused or whose request no longer validates
 * (its agent gone) starts nothing: logged and counted (agent_schedule_ticks_total by outcome). One whose
 * credential is no longer configured starts nothing either and is paused `credential_revoked` (outcome `revoked`,
 * log code `schedule_credential_revoked`).
 */
export async function runTick(ctx: EngineContext, schedules: Schedules, job: Job, now = Date.now()): Promise<string> {
  const data = tickDataSchema.parse(job.data);
  const s = await schedules.get(data.tenant, data.id);
  const count = (outcome: string) => ctx.metrics.scheduleTicks.inc({ outcome });
  if (!s || s.paused) {
    count('skipped');
    ctx.log.info(
      { code: 'schedule_tick_skipped', tenant: data.tenant, schedule: data.id },
      'tick of a removed or paused schedule',
    );
    return 'skipped';
  }
  if (!ownerStillValid(ctx.cfg, s.tenant, s.owner)) {
    count('revoked');
    await schedules.pauseRevoked(s);
    ctx.log.warn(
      { code: 'schedule_credential_revoked', tenant: s.tenant, schedule: s.id },
      'the credential that made this schedule is no longer configured: paused, no run started',
    );
    return 'revoked';
  }
  const tickAt = tickTimeOf(job);
  try {
    const req = { tenant: s.tenant, agent: s.agent, input: s.input, ...(s.budget ? { budget: s.budget } : {}) };
    const { runId, created } = await startRun(ctx, req, undefined, now, `schedule:${s.id}:${tickAt}`);
    count(created ? 'started' : 'duplicate');
    ctx.log.info(
      { code: 'schedule_tick', tenant: s.tenant, schedule: s.id, tickAt, runId, created },
      'schedule ticked',
    );
    return runId;
  } catch (err) {
    if (!(err instanceof InvalidRunRequest)) throw err;
    count('invalid');
    ctx.log.warn(
      { code: 'schedule_invalid', tenant: s.tenant, schedule: s.id, fields: err.fields.map((f) => f.path) },
      'schedule no longer validates',
    );
    return 'invalid';
  }
}

/**
 * A tick that threw (anything but a request that no longer validates, which runTick answers): `retried` while it has
 * attempts left, `failed` once it has none, when the tick's run was never started (alert AgentScheduleTicksFailing).
 */
export function tickFailed(ctx: EngineContext, job: Job | undefined, err: Error): void {
  const data = tickDataSchema.safeParse(job?.data);
  const where = data.success ? { tenant: data.data.tenant, schedule: data.data.id } : {};
  const attempts = job?.opts.attempts ?? 1;
  const last = job === undefined || job.attemptsMade >= attempts;
  ctx.metrics.scheduleTicks.inc({ outcome: last ? 'failed' : 'retried' });
  if (last)
    ctx.log.error(
      { code: 'schedule_tick_failed', ...where, attempts: job?.attemptsMade, err },
      'schedule tick failed on every attempt: its run was not started',
    );
  else
    ctx.log.warn(
      { code: 'schedule_tick_retried', ...where, attempt: job.attemptsMade, err },
      'schedule tick failed: tried again',
    );
}

/**
 * How long a stopping process waits for the schedule worker to close. Its close() waits for the ticks in progress and
 * then for its connection, and hangs on a connection that is reconnecting (a Redis outage; BullMQ #2430, #4656): a
 * worker process stopped during an outage waited out its whole grace period and left with exit code 1, holding
 * nothing. A tick is a few milliseconds of work and makes one run at most (its idempotency key), so the process
 * leaves after this long anyway; a tick cut short is delivered again.
 */
export const SCHEDULE_CLOSE_TIMEOUT_MS = 3000;

/** Attempts of a tick, and the first wait between two (doubled each time: about 31 s in all). */
export const TICK_ATTEMPTS = 5;
export const TICK_BACKOFF_MS = 1000;

/** The schedule worker of a process; close() resolves within SCHEDULE_CLOSE_TIMEOUT_MS. */
export interface ScheduleWorker {
  close(): Promise<void>;
}

/** The worker that turns ticks into runs (run in worker processes; any number of them: one run per tick). */
export function startScheduleWorker(ctx: EngineContext, schedules: Schedules): ScheduleWorker {
  const w = new Worker(ctx.keys.schedulesQueueName(), (job) => runTick(ctx, schedules, job), {
    connection: ctx.redis.duplicate(),
    prefix: ctx.keys.bullPrefix,
    concurrency: 4,
  });
  w.on('error', (err) => ctx.log.warn({ code: 'schedule_worker_error', err }, 'schedule worker error'));
  w.on('failed', (job, err) => tickFailed(ctx, job, err));
  let closing: Promise<void> | undefined;
  return {
    close() {
      closing ??= (async () => {
        const closed = w.close().catch((err: unknown) => {
          ctx.log.warn({ code: 'schedule_worker_error', err }, 'schedule worker close failed');
        });
        if (!(await settledWithin(closed, SCHEDULE_CLOSE_TIMEOUT_MS)))
          ctx.log.warn(
            { code: 'close_timeout', worker: 'schedules', timeoutMs: SCHEDULE_CLOSE_TIMEOUT_MS },
            'schedule worker connection did not close; leaving anyway',
          );
      })();
      return closing;
    },
  };
}
