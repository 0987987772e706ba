/**
 * Money budgets with Redis: the spend of tenants (per UTC day and month), agents (per day) and the fleet (per
 * month), in µ$ (src/core/prices.ts). Like the tenant's token day (tenantBudget.ts), each model attempt's cost
 * estimate is reserved before it on the counters that have a limit (refused when one would pass it: the run stops
 * `budget_exceeded`, reason naming the cost, before the call), and settled to its real cost after it, failed
 * attempts included; the settlement is recorded even past a limit.
 *
 * Reservations are leased: a worker takes a lease on the limited counters with one script (leaseSpend-1.lua) and
 * draws each attempt's estimate from it in memory; only an attempt its lease cannot cover asks Redis again. A lease
 * is sized to what the worker draws: `SPEND_LEASE_ATTEMPTS` estimates, or what it drew since its last batch or in
 * the window before, if more (so a busy worker asks about once a batch), and at most an eighth of the room left
 * under the limit: near a limit that is less than an estimate, so a lease is the one estimate, asked per attempt as
 * before leases. What a worker has not drawn comes back with its next batch, within `SPEND_FLUSH_MS` of the lease.
 *
 * Settlements are batched: a worker adds each attempt's to a batch in memory and sends the batch after
 * `SPEND_FLUSH_MS`, at a graceful stop, and before it lets a limit refuse one of its attempts (so a refusal counts
 * this worker's own attempts at their real cost and holds none of its leases); one script applies a batch once
 * (settleSpend-1.lua). A step with no tenant, agent or fleet money limit therefore makes no Redis call for money of
 * its own: its run's cost is charged by the step's own scripts (costUsed), and the counters and reports get it with
 * the batch. With a limit, an attempt makes one call only when its worker's lease is spent.
 *
 * Bound: a limited counter holds the settled cost of every attempt plus every lease not given back, and a lease is
 * counted before any attempt draws from it; no lease is taken past a limit. So the sum of real costs never passes a
 * limit by more than what attempts cost above their estimates (the estimate prices every input token at the dearest
 * input price and the whole completion cap, so only a provider counting more input tokens than the engine's
 * tokenizer estimated can do so), so never by more than one attempt's pre-flight estimate for the attempts racing
 * for the last room; and what runs were charged (costUsed) is never above the counter. The settlement of an attempt
 * that cost more than it drew is sent at once.
 *
 * A worker killed (SIGKILL) loses what it held in memory, always on the counted side: the rest of its leases stays
 * on the limited counters until the counter itself ends with its UTC day or month (nothing else can tell what it
 * drew: its attempts in flight may have cost that money). That is at most one lease per tenant and agent it served
 * in its last `SPEND_FLUSH_MS`, each at most the larger of `SPEND_LEASE_ATTEMPTS` estimates and what it drew in a
 * batch's window, and at most an eighth of the room then. Its unsent batch keeps its attempts' draws there too (never
 * less than what they cost), and they are missing from the reports and from the counters without a limit, at most
 * `SPEND_FLUSH_MS` of that worker's attempts; their runs' costUsed has them.
 */
import { randomUUID } from 'node:crypto';
import type { BudgetStop } from './policy.js';
import { PriceTable, type Price, type PriceEntry } from '../core/prices.js';
import type { RedisClient } from '../store/connect.js';
import type { KeySpace } from '../store/keys.js';
import { leaseSpend, type LimitedCounter, type SpendRefusal } from '../store/calls/leaseSpend.js';
import { settleSpend, type CounterDelta, type ReportCost, type SpendBatch } from '../store/calls/settleSpend.js';

/** What the money budgets read of the configuration (src/config/config.ts documents each). */
export interface SpendOptions {
  readonly MODEL_PRICES: readonly PriceEntry[];
  readonly TENANT_DAILY_COST: number;
  readonly TENANT_MONTHLY_COST: number;
  readonly AGENT_DAILY_COST: number;
  readonly FLEET_MONTHLY_COST: number;
  /** How long an attempt's settlement, and a lease's undrawn rest, may wait in memory for the next batch (ms). */
  readonly SPEND_FLUSH_MS: number;
  /** The most attempts' estimates one lease holds (1: a lease per attempt). */
  readonly SPEND_LEASE_ATTEMPTS: number;
}

/** Who an attempt's money is charged to. */
export interface SpendScope {
  tenant: string;
  agent: string;
  provider: string;
  model: string;
}

/**
 * An attempt's reservation: `amount` µ$ drawn from a lease taken on each of `counters` (the keys of the day it was
 * taken on).
 */
export interface SpendHold {
  amount: number;
  counters: readonly { key: string; ttlMs: number }[];
}

/** Told when a batch could not be sent (it is kept, and sent with the next). */
export type SpendFlushFailure = (err: unknown) => void;

/** A day's counters are read for limits only that day. */
const DAY_TTL_MS = 48 * 3600_000;
/** A day's report is kept as long as the console's spend page plots (31 days) and `agentctl spend` reads back. */
const DAY_REPORT_TTL_MS = 35 * 24 * 3600_000;
const MONTH_TTL_MS = 62 * 24 * 3600_000;
/** A batch's mark outlives any resend of the command that carried it (a reconnect resends at once). */
const MARK_TTL_MS = 15 * 60_000;
/**
 * A lease takes at most 1/LEASE_SHARE of the room left under a limit: seven workers' fresh leases leave room for
 * another's estimate whenever there is room for eight, and below eight estimates of room a lease is one estimate.
 */
const LEASE_SHARE = 8;
const DAY_MS = 24 * 3600_000;
/** Tenant and agent pairs whose counters' keys a worker keeps for the day (past this, it starts over). */
const MAX_KEYED_SCOPES = 10_000;

type Counter = 'tenantDay' | 'tenantMonth' | 'agentDay' | 'fleetMonth';
const COUNTERS: readonly Counter[] = ['tenantDay', 'tenantMonth', 'agentDay', 'fleetMonth'];
const COUNTER_NAMES: Record<Counter, string> = {
  tenantDay: 'tenant today',
  tenantMonth: 'tenant this month',
  agentDay: 'agent today',
  fleetMonth: 'fleet this month',
};
const ttlOf = (c: Counter | 'dayReport' | 'monthReport') =>
  c === 'tenantMonth' || c === 'fleetMonth' || c === 'monthReport'
    ? MONTH_TTL_MS
    : c === 'dayReport'
      ? DAY_REPORT_TTL_MS
      : DAY_TTL_MS;

/** A lease's undrawn rest (µ$) on its counters. */
interface Lease {
  readonly counters: readonly LimitedCounter[];
  left: number;
}

/** Settlements not sent yet, summed by counter and by report field. */
class PendingSpend {
  private counters = new Map<string, CounterDelta>();
  private reports = new Map<string, ReportCost>();

  get empty(): boolean {
    return this.counters.size === 0 && this.reports.size === 0;
  }

  count(key: string, delta: number, ttlMs: number): void {
    if (delta === 0) return;
    const c = this.counters.get(key);
    if (c) c.delta += delta;
    else this.counters.set(key, { key, delta, ttlMs });
  }

  report(key: string, field: string, cost: number, ttlMs: number): void {
    if (cost === 0) return;
    const id = `${key}\n${field}`;
    const r = this.reports.get(id);
    if (r) r.cost += cost;
    else this.reports.set(id, { key, field, cost, ttlMs });
  }

  /** Takes everything pending (cleared here): its counters (net zero ones left out) and report fields. */
  take(): { counters: CounterDelta[]; reports: ReportCost[] } {
    const taken = {
      counters: [...this.counters.values()].filter((c) => c.delta !== 0),
      reports: [...this.reports.values()],
    };
    this.counters = new Map();
    this.reports = new Map();
    return taken;
  }

  /** Puts back a batch that was not applied. */
  restore(b: SpendBatch): void {
    for (const c of b.counters) this.count(c.key, c.delta, c.ttlMs);
    for (const r of b.reports) this.report(r.key, r.field, r.cost, r.ttlMs);
  }
}

export class SpendBudget {
  readonly prices: PriceTable;
  private readonly limits: Record<Counter, number>;
  private readonly flushMs: number;
  private readonly leaseAttempts: number;
  /** This worker's leases, by their counters' keys: what its attempts may still draw without asking Redis. */
  private readonly leases = new Map<string, Lease>();
  /** What this worker's attempts drew (µ$), by the counters' keys: since its last batch, and in the window before. */
  private readonly drawn = new Map<string, { window: number; before: number }>();
  /** Leases asked and not answered yet, by their counters' keys. */
  private readonly asking = new Map<string, Promise<unknown>>();
  /** Names this process's batches (their marks). */
  private readonly writer = randomUUID();
  private batches = 0;
  private readonly pending = new PendingSpend();
  private timer: NodeJS.Timeout | undefined;
  /** Calls in flight: every one (a graceful stop waits for them), and the batches among them. */
  private readonly sending = new Set<Promise<unknown>>();
  private readonly batchesInFlight = new Set<Promise<unknown>>();
  /**
   * The UTC day the counters' keys were last named for, and each tenant and agent's keys on it: every attempt names
   * them twice (its reservation and its settlement), so they are built once a day, not twice an attempt.
   */
  private keyDay = { from: 0, to: 0, day: '' };
  private readonly keysByScope = new Map<string, ReturnType<KeySpace['spend']>>();

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: KeySpace,
    opts: SpendOptions,
    private readonly onFlushFailure: SpendFlushFailure = () => {},
  ) {
    this.prices = new PriceTable(undefined, opts.MODEL_PRICES);
    this.limits = {
      tenantDay: opts.TENANT_DAILY_COST,
      tenantMonth: opts.TENANT_MONTHLY_COST,
      agentDay: opts.AGENT_DAILY_COST,
      fleetMonth: opts.FLEET_MONTHLY_COST,
    };
    this.flushMs = opts.SPEND_FLUSH_MS;
    this.leaseAttempts = Math.max(1, opts.SPEND_LEASE_ATTEMPTS);
  }

  /** Whether any tenant, agent or fleet money limit is set. */
  get limited(): boolean {
    return COUNTERS.some((c) => this.limits[c] > 0);
  }

  priceAt(provider: string, model: string | undefined, nowMs: number): Price | undefined {
    return this.prices.priceAt(provider, model, nowMs);
  }

  private keysOf(s: SpendScope, nowMs: number): ReturnType<KeySpace['spend']> {
    if (!(nowMs >= this.keyDay.from && nowMs < this.keyDay.to)) {
      const from = nowMs - (((nowMs % DAY_MS) + DAY_MS) % DAY_MS);
      this.keyDay = { from, to: from + DAY_MS, day: new Date(from).toISOString().slice(0, 10) };
      this.keysByScope.clear();
    }
    const scope = `${s.tenant}\n${s.agent}`;
    let k = this.keysByScope.get(scope);
    if (!k) {
      if (this.keysByScope.size >= MAX_KEYED_SCOPES) this.keysByScope.clear();
      k = this.keys.spend(s.tenant, s.agent, this.keyDay.day, this.keyDay.day.slice(0, 7));
      this.keysByScope.set(scope, k);
    }
    return k;
  }

  /**
   * Reserves an attempt's estimate on the counters with a limit, drawn from this worker's lease on them (no Redis
   * call), or from a new lease when the rest cannot cover it: the hold to settle the attempt with, or a BudgetStop
   * (kind `tenant_cost`) naming the counter that has no room for it (nothing reserved). A refusal is final only once
   * this worker's pending settlements are on the counters and its leases are given back.
   */
  async reserve(s: SpendScope, estimate: number, nowMs: number): Promise<{ hold: SpendHold } | { stop: BudgetStop }> {
    const k = this.keysOf(s, nowMs);
    const limited = COUNTERS.filter((c) => this.limits[c] > 0);
    const counters: LimitedCounter[] = limited.map((c) => ({ key: k[c], limit: this.limits[c], ttlMs: ttlOf(c) }));
    const id = counters.map((c) => c.key).join(' ');
    for (;;) {
      const lease = this.leases.get(id);
      if (lease && lease.left >= estimate) {
        lease.left -= estimate;
        this.draw(id, estimate);
        return { hold: { amount: estimate, counters: lease.counters } };
      }
      // One lease asked at a time per counters: the attempts that come meanwhile draw from it when it comes.
      const asked = this.asking.get(id);
      if (!asked) break;
      await asked.catch(() => undefined);
    }
    let refused = await this.lease(id, counters, estimate);
    // Refused while this worker still holds settlements or leases: sent first (they give back what its attempts
    // reserved above their cost and what it has not drawn), then the lease is asked again.
    if (refused && (!this.pending.empty || this.batchesInFlight.size > 0 || this.leases.size > 0)) {
      await this.flush();
      await Promise.allSettled([...this.batchesInFlight]);
      refused = await this.lease(id, counters, estimate);
    }
    if (!refused) return { hold: { amount: estimate, counters } };
    const counter = limited[refused.index]!;
    const who = counter.startsWith('tenant') ? s.tenant : counter === 'agentDay' ? s.agent : 'fleet';
    return {
      stop: {
        kind: 'tenant_cost',
        reason:
          `cost: ${who} (${COUNTER_NAMES[counter]}) used ${refused.used} + estimate ${estimate} > ` +
          `${this.limits[counter]} µ$`,
      },
    };
  }

  /**
   * A new lease on `counters`, the attempt's `estimate` drawn from it at once; the rest of the worker's lease on them
   * goes back in the same script. A refusal leases nothing. A call whose answer is lost leaves what it leased counted
   * (and what it gave back given back): never given back twice.
   */
  private lease(id: string, counters: readonly LimitedCounter[], estimate: number): Promise<SpendRefusal | undefined> {
    const asked = this.leaseOnce(id, counters, estimate);
    this.asking.set(id, asked);
    return asked.finally(() => {
      if (this.asking.get(id) === asked) this.asking.delete(id);
    });
  }

  private async leaseOnce(
    id: string,
    counters: readonly LimitedCounter[],
    estimate: number,
  ): Promise<SpendRefusal | undefined> {
    const back = this.leases.get(id)?.left ?? 0;
    this.leases.delete(id);
    // Sized to what the worker draws: SPEND_LEASE_ATTEMPTS estimates, or what it drew since its last batch or in
    // the window before, if more (a busy worker asks about once a batch; one that speeds up doubles its lease).
    const d = this.drawn.get(id);
    const want = Math.max(estimate * this.leaseAttempts, d?.window ?? 0, d?.before ?? 0);
    const res = await this.send(leaseSpend(this.redis, { back, need: estimate, want, share: LEASE_SHARE, counters }));
    if ('refused' in res) return res.refused;
    this.draw(id, estimate);
    const rest = res.amount - estimate;
    if (rest > 0) {
      // Another attempt's lease on the same counters may have come back meanwhile: one rest for both.
      const held = this.leases.get(id);
      if (held) held.left += rest;
      else this.leases.set(id, { counters, left: rest });
      this.timer ??= setTimeout(() => void this.flush(), this.flushMs).unref();
    }
    return undefined;
  }

  private draw(id: string, estimate: number): void {
    const d = this.drawn.get(id);
    if (d) d.window += estimate;
    else this.drawn.set(id, { window: estimate, before: 0 });
  }

  /**
   * Records an attempt's real cost (giving back its reservation, if it held one) in the pending batch, sent within
   * SPEND_FLUSH_MS. Never refused.
   */
  settle(s: SpendScope, cost: number, hold: SpendHold | undefined, nowMs: number): void {
    if (cost === 0 && !hold) return;
    const k = this.keysOf(s, nowMs);
    for (const c of COUNTERS) this.pending.count(k[c], cost, ttlOf(c));
    // The reservation comes off the counters it was taken on (the day it was taken, if that day has ended since).
    for (const c of hold?.counters ?? []) this.pending.count(c.key, -hold!.amount, c.ttlMs);
    const field = `${s.tenant} ${s.agent} ${s.provider}/${s.model}`;
    this.pending.report(k.dayReport, field, cost, ttlOf('dayReport'));
    this.pending.report(k.monthReport, field, cost, ttlOf('monthReport'));
    // An attempt that cost more than it reserved leaves the limited counters below the real spend until its
    // settlement is applied: sent now (before this worker's next call), so no counter with a limit ever waits on it.
    if (hold && cost > hold.amount) void this.flush();
    else if (!this.pending.empty) this.timer ??= setTimeout(() => void this.flush(), this.flushMs).unref();
  }

  /** Sends the pending settlements now (a batch that fails is kept for the next, and reported). */
  async flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    // What the worker's leases hold undrawn goes back with the batch: another worker may need that room.
    for (const lease of this.leases.values())
      for (const c of lease.counters) this.pending.count(c.key, -lease.left, c.ttlMs);
    this.leases.clear();
    // A new window of draws; counters drawn on in neither window are forgotten.
    for (const [id, d] of this.drawn) {
      if (d.window === 0 && d.before === 0) this.drawn.delete(id);
      else [d.before, d.window] = [d.window, 0];
    }
    const batch = this.takeBatch();
    if (!batch) return;
    try {
      const sent = this.send(settleSpend(this.redis, batch));
      this.batchesInFlight.add(sent);
      await sent.finally(() => this.batchesInFlight.delete(sent));
    } catch (err) {
      this.pending.restore(batch);
      this.onFlushFailure(err);
      if (!this.pending.empty) this.timer ??= setTimeout(() => void this.flush(), this.flushMs).unref();
    }
  }

  /** At a graceful stop: the pending settlements and the leases' rest sent, and every call in flight answered. */
  async close(): Promise<void> {
    await this.flush();
    await Promise.allSettled([...this.sending]);
    // A lease answered after the first flush (a call in flight at the stop) is given back too.
    if (this.leases.size > 0 || !this.pending.empty) {
      await this.flush();
      await Promise.allSettled([...this.sending]);
    }
  }

  private takeBatch(): SpendBatch | undefined {
    if (this.pending.empty) return undefined;
    const { counters, reports } = this.pending.take();
    if (counters.length === 0 && reports.length === 0) return undefined;
    return { mark: this.keys.spendMark(this.writer, ++this.batches), markTtlMs: MARK_TTL_MS, counters, reports };
  }

  private send<T>(p: Promise<T>): Promise<T> {
    this.sending.add(p);
    return p.finally(() => this.sending.delete(p));
  }
}

/** One line of a spend report: who spent what (µ$) on which model. */
export interface SpendLine {
  tenant: string;
  agent: string;
  model: string;
  micros: number;
}

/**
 * The real spend of a UTC day (`YYYY-MM-DD`) or month (`YYYY-MM`) by tenant, agent and model, largest first, with its
 * total: the settled costs of every model attempt (reservations of attempts whose worker died are not in it).
 */
export async function readSpendReport(
  redis: RedisClient,
  keys: KeySpace,
  period: string,
): Promise<{ period: string; currency: 'USD'; unit: 'micros'; totalMicros: number; lines: SpendLine[] }> {
  const key = keys.spendReports(period, period).dayReport;
  const raw = await redis.hgetall(key);
  const lines = Object.entries(raw)
    .map(([field, v]) => {
      const [tenant = '', agent = '', model = ''] = field.split(' ');
      return { tenant, agent, model, micros: Number(v) };
    })
    .sort((a, b) => b.micros - a.micros || a.tenant.localeCompare(b.tenant));
  return { period, currency: 'USD', unit: 'micros', totalMicros: lines.reduce((n, l) => n + l.micros, 0), lines };
}
