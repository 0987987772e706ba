/**
 * Flow control's scrape-time gauges (prom-client `collect()`, on the Metrics' registry): each
 * tenant's line (waiting runs, age of the oldest), its slots held, and each rate limit's token use.
 * One Redis read (readFlowView) per scrape feeds them all. Every process exports the same values:
 * alert rules take max(), never sum().
 */
import { Gauge } from 'prom-client';
import type { Logger } from 'pino';
import type { Metrics } from '../metrics/metrics.js';
import type { RedisClient } from '../store/connect.js';
import type { KeySpace } from '../store/keys.js';
import type { FlowOptions } from './admission.js';
import type { RateOptions } from './rateLimits.js';
import { readFlowView, type FlowView } from './view.js';

const registered = new WeakSet<Metrics>();

export function registerFlowGauges(
  metrics: Metrics,
  d: { redis: RedisClient; keys: KeySpace; cfg: FlowOptions & RateOptions; log: Logger },
  now: () => number = Date.now,
): void {
  if (registered.has(metrics)) return;
  registered.add(metrics);
  const r = [metrics.registry];
  let pending: Promise<FlowView> | undefined;
  const view = (): Promise<FlowView> => {
    if (!pending) {
      pending = readFlowView(d.redis, d.keys, d.cfg, now(), 2);
      const clear = () => {
        pending = undefined;
      };
      pending.then(clear, clear);
    }
    return pending;
  };
  const collector = (name: string, fill: (g: Gauge, v: FlowView) => void) =>
    async function (this: Gauge) {
      try {
        const v = await view();
        this.reset();
        fill(this, v);
      } catch (err) {
        metrics.scrapeErrors.inc({ collector: name });
        d.log.warn({ code: 'scrape_collect_failed', collector: name, err }, 'scrape-time gauge not refreshed');
      }
    };
  new Gauge({
    name: 'agent_flow_waiting_runs',
    help: "Runs waiting for admission in their tenant's line",
    labelNames: ['tenant'],
    registers: r,
    collect: collector('flow_waiting_runs', (g, v) => {
      for (const t of v.tenants) g.set({ tenant: t.tenant }, t.waiting);
    }),
  });
  new Gauge({
    name: 'agent_flow_oldest_waiting_seconds',
    help: "Age of the oldest run waiting in a tenant's line; 0 when none waits",
    labelNames: ['tenant'],
    registers: r,
    collect: collector('flow_oldest_waiting', (g, v) => {
      for (const t of v.tenants) g.set({ tenant: t.tenant }, t.oldestWaitingMs / 1000);
    }),
  });
  new Gauge({
    name: 'agent_flow_held_runs',
    help: 'Runs of a tenant at work (holding an admission slot)',
    labelNames: ['tenant'],
    registers: r,
    collect: collector('flow_held_runs', (g, v) => {
      for (const t of v.tenants) g.set({ tenant: t.tenant }, t.held);
    }),
  });
  new Gauge({
    name: 'agent_rate_limit_tokens_per_minute',
    help: 'Tokens used per minute through a model rate limit (last complete 5 s slot), beside its limit',
    labelNames: ['bucket', 'kind'],
    registers: r,
    collect: collector('rate_limit_tokens', (g, v) => {
      for (const b of v.rates) {
        g.set({ bucket: b.bucket, kind: 'used' }, b.tokensPerMinute[0]?.value ?? 0);
        g.set({ bucket: b.bucket, kind: 'limit' }, b.tpm);
      }
    }),
  });
}
