/**
 * Step-level fairness: the order in which admitted runs' step jobs are taken.
 *
 * Admission takes turns between tenants run by run; once admitted, every run keeps one step job
 * in its shard's queue, and BullMQ's wait list is first come, first served. A tenant with many
 * runs at work therefore keeps up to its limit of step jobs ahead of a tenant that has just been
 * admitted, at every step of that tenant's runs. Under flow control each next step's job is given
 * a level that says how much of the fleet its tenant holds: the tenant's runs at work divided by
 * its weight, in powers of two. A tenant at the lowest level (under two runs a unit of weight) has
 * its step jobs on the wait list, the others theirs in BullMQ's prioritized set at their levels
 * (in the commit itself, commitStep-23.lua: the same atomic change, no extra request). BullMQ
 * serves the wait list first, then the lowest priority, each in the order the jobs were added; so
 * a tenant holding less than half of another's share is served first, and tenants within a factor
 * of two of each other share the queue in arrival order as before (a strict order by count would
 * let a tenant with 45 runs at work shut out one with 50).
 *
 * No tenant is shut out for long: a tenant ahead of another holds at most half its share of
 * runs, each with one step job at a time, so the slots it can take are bounded by its own runs.
 * A run's first step is given its priority by the admission that promotes it (from the count the
 * admission script returns, one more request per run, none per step). A woken, resumed or
 * redelivered step goes to the wait list, with the lowest level's steps: rare, and each already
 * had its turn.
 *
 * The share is read from the admission's counters (`counts`, `settings` of `{flow}`) once per
 * bookkeeping sweep (FLOW_SWEEP_MS) into this process's memory, never per step: a priority is
 * an order, not a limit, so a second's staleness shifts an order for that second and nothing
 * else. Flow control off: no priority, every step job is a standard job as before.
 */
import { BULLMQ_MAX_PRIORITY } from '../store/bullmqInternals.js';
import { ownValue } from '../core/ownValue.js';

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
 * priority its next step job is given: the lowest level (a load under 2) is the wait list (0, a standard job), which
 * BullMQ serves before any prioritized job and in the order the jobs were added, as it serves one priority; each
 * level above it is the prioritized set at that level less one. The order is the levels' own, and the step jobs of
 * tenants at the lowest level take the cheaper path: a prioritized add and fetch (ZADD and the priority counter,
 * then ZPOPMIN) cost Redis about 6 % of a read-only step's work against LPUSH and RPOPLPUSH.
 *
 * Only the lowest level there can be, not the lowest of the tenants at work: a job on the wait list cannot be put
 * behind one added later, so a tenant at level 5 with its step jobs there would keep a tenant arriving at level 1
 * behind all of them (one a run: a pass over its whole backlog, seconds with a model's latency), where the prioritized
 * set lets the newcomer go first at once.
 */
export class StepPriorities {
  private byTenant = new Map<string, number>();

  constructor(
    private readonly configuredWeights: Readonly<Record<string, number>>,
    private readonly defaultWeight = 1,
  ) {}

  /** The tenant's next step job's BullMQ priority: 0 (the wait list) at the lowest level, else its level less one. */
  of(tenant: string): number {
    return (this.byTenant.get(tenant) ?? 1) - 1;
  }

  /** A share read more recently than the last update (an admission's own count): kept until the next update. */
  note(tenant: string, held: number, weight: number): void {
    this.byTenant.set(tenant, stepPriority(held, weight));
  }

  /** Replaces every tenant's priority with the one these shares give (a weight set at run time wins). */
  update(shares: FlowShares): void {
    const next = new Map<string, number>();
    for (const [field, raw] of Object.entries(shares.counts)) {
      if (!field.startsWith('t:')) continue;
      const tenant = field.slice(2);
      const weight =
        Number(shares.settings[`w:${tenant}`] ?? '') || ownValue(this.configuredWeights, tenant) || this.defaultWeight;
      next.set(tenant, stepPriority(Number(raw) || 0, weight));
    }
    this.byTenant = next;
  }
}
