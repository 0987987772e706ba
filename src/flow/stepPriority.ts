/**
 * Step-level fairness: the order in which admitted runs' step jobs are taken.
 *
 * Admission takes turns between tenants run by run; once admitted, every run keeps one step job
 * in its shard's queue, and BullMQ's wait list is first come, first served. A tenant with many
 * runs at work therefore keeps up to its limit of step jobs ahead of a tenant that has just been
 * admitted, at every step of that tenant's runs. Under flow control each next step's job is given
 * a level that says how much of the fleet its tenant holds: the tenant's runs at work divided by
 * its weight, in powers of two. The least loaded tenants' step jobs go to the wait list, the
 * others' to BullMQ's prioritized set, with their levels above the lowest as priorities (in the
 * commit itself, commitStep-23.lua: the same atomic change, no extra request). BullMQ serves the
 * wait list first, then the lowest priority, each in the order the jobs were added; so a tenant
 * holding less than half of another's share is served first, and tenants within a factor of two
 * of each other share the queue in arrival order as before (a strict order by count would let a
 * tenant with 45 runs at work shut out one with 50).
 *
 * No tenant is shut out for long: a tenant ahead of another holds at most half its share of
 * runs, each with one step job at a time, so the slots it can take are bounded by its own runs.
 * A run's first step is given its priority by the admission that promotes it (from the count the
 * admission script returns, one more request per run, none per step). A woken, resumed or
 * redelivered step goes to the wait list, with the least loaded tenants' steps: rare, and each
 * already had its turn.
 *
 * The share is read from the admission's counters (`counts`, `settings` of `{flow}`) once per
 * bookkeeping sweep (FLOW_SWEEP_MS) into this process's memory, never per step: a priority is
 * an order, not a limit, so a second's staleness shifts an order for that second and nothing
 * else. Flow control off: no priority, every step job is a standard job as before.
 */
import { BULLMQ_MAX_PRIORITY } from '../store/bullmqInternals.js';

/**
 * The priority of a step job of a tenant holding `held` runs at work with `weight`: 1 up to a load of 2, then one
 * more per doubling (BullMQ: lower first).
 */
export function stepPriority(held: number, weight: number): number {
  const load = weight > 0 ? held / weight : held;
  if (!(load >= 2)) return 1;
  return Math.min(BULLMQ_MAX_PRIORITY, 1 + Math.floor(Math.log2(load)));
}

/** The admission's counters as read from Redis: `t:<tenant>` -> runs at work, and the run-time `w:<tenant>` weights. */
export interface FlowShares {
  counts: Record<string, string>;
  settings: Record<string, string>;
}

/**
 * Each tenant's step priority, computed from the last read of the shares (a tenant not seen yet: 1), as the BullMQ
 * priority its next step job is given: relative to the least loaded tenant at work, whose step jobs go to the wait
 * list (0, a standard job), the others' to the prioritized set, one level a doubling above it. BullMQ serves the wait
 * list before any prioritized job and each in the order the jobs were added, so the order is the levels' own; but
 * where every tenant at work is at one level (one tenant, or tenants within a factor of two), every step job is a
 * standard job, the cheaper path: a prioritized add and fetch cost Redis about 6 % of a step's work (ZADD and the
 * priority counter, then ZPOPMIN, against LPUSH and RPOPLPUSH).
 */
export class StepPriorities {
  private byTenant = new Map<string, number>();
  /** The lowest level of a tenant at work: its steps go to the wait list. */
  private floor = 1;

  constructor(
    private readonly configuredWeights: Readonly<Record<string, number>>,
    private readonly defaultWeight = 1,
  ) {}

  /** The tenant's next step job's BullMQ priority: 0 (the wait list) at the lowest level, else the levels above. */
  of(tenant: string): number {
    return Math.max(0, (this.byTenant.get(tenant) ?? 1) - this.floor);
  }

  /**
   * A share read more recently than the last update (an admission's own count): kept until the next update. A tenant
   * below the lowest level lowers it at once, so the others' next steps go behind its.
   */
  note(tenant: string, held: number, weight: number): void {
    const level = stepPriority(held, weight);
    this.byTenant.set(tenant, level);
    this.floor = Math.min(this.floor, level);
  }

  /** Replaces every tenant's priority with the one these shares give (a weight set at run time wins). */
  update(shares: FlowShares): void {
    const next = new Map<string, number>();
    let floor = Infinity;
    for (const [field, raw] of Object.entries(shares.counts)) {
      if (!field.startsWith('t:')) continue;
      const tenant = field.slice(2);
      const held = Number(raw) || 0;
      const weight =
        Number(shares.settings[`w:${tenant}`] ?? '') || this.configuredWeights[tenant] || this.defaultWeight;
      const level = stepPriority(held, weight);
      next.set(tenant, level);
      if (held > 0) floor = Math.min(floor, level);
    }
    this.byTenant = next;
    this.floor = floor === Infinity ? 1 : floor;
  }
}
