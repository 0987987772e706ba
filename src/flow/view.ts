/**
 * What flow control looks like right now, read from Redis for the console page, `agentctl flow`
 * and the scrape-time gauges: each tenant's line, slots and share, the agents' slots, the recent
 * changes of weights and limits, and each rate limit's recent token use against its limit.
 * Reads only; a few commands per tenant (all keys in the `{flow}` slot) and per bucket.
 */
import type { RedisClient } from '../store/connect.js';
import type { KeySpace } from '../store/keys.js';
import { MAX_PRIORITY, type FlowOptions } from './admission.js';
import { bucketsOf, SERIES_SLOT_MS, type RateOptions } from './rateLimits.js';
import { ownValue } from '../core/ownValue.js';

export interface TenantLine {
  tenant: string;
  waiting: number;
  /**
   * The most its line may hold before a new run is refused (its own set at run time, else FLOW_TENANT_WAITING_LIMITS,
   * else FLOW_TENANT_MAX_WAITING; 0 = no limit).
   */
  maxWaiting: number;
  /** ms since the oldest waiting run entered the line (0 when none waits) */
  oldestWaitingMs: number;
  held: number;
  admitted: number;
  weight: number;
  /** 0 = no limit */
  limit: number;
  /** This tenant's share of the turns among the tenants with work (waiting or held), by weight. */
  share: number;
}

export interface FlowChangeRecord {
  who: string;
  what: string;
  of: string;
  from: string;
  to: string;
  at: number;
}

export interface RateSeries {
  bucket: string;
  rpm: number;
  tpm: number;
  /** tokens per minute in each SERIES_SLOT_MS slot, oldest first, ending at the current slot */
  tokensPerMinute: { at: number; value: number }[];
}

export interface FlowView {
  enabled: boolean;
  tenants: TenantLine[];
  agents: { agent: string; held: number; limit: number }[];
  fleet: { held: number; limit: number };
  changes: FlowChangeRecord[];
  rates: RateSeries[];
}

/**
 * The view of a tenant-scoped principal (src/http/operators/flow.ts, flowViewFor): its tenants' lines without their
 * share, its tenants' changes, the rate limits it shares or owns; no agents' slots and no fleet. Each of those counts
 * every tenant's runs (a share is the tenant's weight over every busy tenant's), so each would tell how busy the
 * other tenants are.
 */
export interface ScopedFlowView {
  enabled: boolean;
  tenants: Omit<TenantLine, 'share'>[];
  changes: FlowChangeRecord[];
  rates: RateSeries[];
}

const num = (v: string | null | undefined, def = 0): number =>
  v === null || v === undefined || v === '' ? def : Number(v);

/** The number after a setting's prefix, from the run-time settings, then the configuration, then the default. */
function effective(
  settings: Record<string, string>,
  configured: Readonly<Record<string, number>>,
  field: string,
  name: string,
  def: number,
): number {
  const set = settings[`${field}:${name}`];
  return set !== undefined ? Number(set) : (ownValue(configured, name) ?? def);
}

export async function readFlowView(
  redis: RedisClient,
  keys: KeySpace,
  cfg: FlowOptions & RateOptions,
  now: number,
  seriesSlots = 60,
): Promise<FlowView> {
  const k = keys.flow();
  const [counts, settings, admitted, waitingRaw, changesRaw] = await Promise.all([
    redis.hgetall(k.counts),
    redis.hgetall(k.settings),
    redis.hgetall(k.admitted),
    redis.hvals(k.waiting),
    redis.lrange(k.audit, 0, 19),
  ]);
  const names = new Set<string>();
  for (const f of Object.keys(counts)) if (f.startsWith('t:')) names.add(f.slice(2));
  for (const raw of waitingRaw) names.add((JSON.parse(raw) as { tenant: string }).tenant);
  for (const f of Object.keys(settings)) if (/^[wtm]:/.test(f)) names.add(f.slice(2));
  const tenants: TenantLine[] = [];
  for (const tenant of [...names].sort()) {
    const line = keys.flowLine(tenant);
    const waiting = await redis.zcard(line);
    tenants.push({
      tenant,
      waiting,
      maxWaiting: effective(settings, cfg.FLOW_TENANT_WAITING_LIMITS, 'm', tenant, cfg.FLOW_TENANT_MAX_WAITING),
      oldestWaitingMs: waiting > 0 ? now - (await oldestArrival(redis, line)) : 0,
      held: num(counts[`t:${tenant}`]),
      admitted: num(admitted[tenant]),
      weight: effective(settings, cfg.FLOW_TENANT_WEIGHTS, 'w', tenant, 1),
      limit: effective(settings, cfg.FLOW_TENANT_LIMITS, 't', tenant, cfg.FLOW_TENANT_CONCURRENCY),
      share: 0,
    });
  }
  const busyWeight = tenants.filter((t) => t.waiting + t.held > 0).reduce((s, t) => s + t.weight, 0);
  for (const t of tenants) t.share = busyWeight > 0 && t.waiting + t.held > 0 ? t.weight / busyWeight : 0;
  const agentNames = new Set<string>();
  for (const f of Object.keys(counts)) if (f.startsWith('a:')) agentNames.add(f.slice(2));
  for (const f of Object.keys(settings)) if (f.startsWith('a:')) agentNames.add(f.slice(2));
  const agents = [...agentNames].sort().map((agent) => ({
    agent,
    held: num(counts[`a:${agent}`]),
    limit: effective(settings, cfg.FLOW_AGENT_LIMITS, 'a', agent, cfg.FLOW_AGENT_CONCURRENCY),
  }));
  const changes = changesRaw.map((c) => JSON.parse(c) as FlowChangeRecord);
  const rates = await readRates(redis, keys, cfg, now, seriesSlots, [...names]);
  return {
    enabled: cfg.FLOW_CONTROL,
    tenants,
    agents,
    fleet: { held: num(counts.all), limit: cfg.FLOW_FLEET_CONCURRENCY },
    changes,
    rates,
  };
}

/** Arrival (ms) of the oldest run in a line: the first of each priority band (a place is band * 1e13 + arrival). */
async function oldestArrival(redis: RedisClient, line: string): Promise<number> {
  let oldest = Infinity;
  // Band -1: runs woken from a wait, at the front of the line (placeOfWoken); then one band per priority level.
  for (let band = -1; band <= MAX_PRIORITY; band++) {
    const first = await redis.zrangebyscore(line, band * 1e13, `(${(band + 1) * 1e13}`, 'WITHSCORES', 'LIMIT', 0, 1);
    if (first.length === 2) oldest = Math.min(oldest, Number(first[1]) - band * 1e13);
  }
  return Number.isFinite(oldest) ? oldest : Date.now();
}

async function readRates(
  redis: RedisClient,
  keys: KeySpace,
  cfg: RateOptions,
  now: number,
  slots: number,
  tenants: string[],
): Promise<RateSeries[]> {
  const out: RateSeries[] = [];
  const last = Math.floor(now / SERIES_SLOT_MS) * SERIES_SLOT_MS;
  for (const b of bucketsOf(cfg, tenants)) {
    const series = await redis.hgetall(keys.rateBucket(b.bucket).series);
    const points: { at: number; value: number }[] = [];
    for (let i = slots - 1; i >= 0; i--) {
      const at = last - i * SERIES_SLOT_MS;
      points.push({ at, value: (num(series[String(at)]) * 60_000) / SERIES_SLOT_MS });
    }
    out.push({ bucket: b.bucket, rpm: b.rpm, tpm: b.tpm, tokensPerMinute: points });
  }
  return out;
}
