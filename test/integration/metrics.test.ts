/**
 * Prometheus metrics against the real sandbox over HTTP and real Redis:
 * counters moved by exactly the expected amounts by scripted runs, scrape-time
 * gauges computed from the ledger indexes and queues, bounded labels.
 *
 * Values are read with prom-client's registry.getMetricsAsJSON() (the same
 * collect() path as /metrics); the API's /metrics text is checked for the
 * scrape-time gauges and for run ids in label values.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createHarness, sampleTicket, type Harness, supportTool } from '../../testkit/harness.js';
import { buildSpec } from '../../src/producer/intake.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { actionIdentity } from '../../src/ledger/identity.js';
import type { WriteTool } from '../../src/core/tool.js';
import type { Script } from '../../src/models/scriptedTurns.js';
import type { FaultRule } from '../../sandbox/types.js';
import { newMetrics, type Metrics } from '../../src/metrics/metrics.js';
import { registerScrapeCollectors } from '../../src/runs/scrape.js';
import { KeySpace } from '../../src/store/keys.js';
import { createLogger } from '../../src/metrics/log.js';
import { emailCall as email, final, ticketCall, turn } from '../../testkit/turns.js';

const t = turn;
const DONE = ['completed', 'needs_human', 'failed'];

type Labels = Record<string, string>;

/** Sum of the samples of `name` whose labels include `labels` (0 when the series does not exist yet). */
async function value(m: Metrics, name: string, labels: Labels = {}): Promise<number> {
  const all = await m.registry.getMetricsAsJSON();
  const metric = all.find((x) => x.name === name);
  if (!metric) throw new Error(`metric ${name} is not registered`);
  return metric.values
    .filter((v) => Object.entries(labels).every(([k, want]) => String((v.labels as Labels)[k]) === want))
    .reduce((acc, v) => acc + v.value, 0);
}

async function snapshot(m: Metrics, names: [string, Labels?][]): Promise<number[]> {
  return Promise.all(names.map(([n, l]) => value(m, n, l ?? {})));
}

/** Every label value of every sample of the registry. */
async function labelValues(m: Metrics): Promise<string[]> {
  const all = await m.registry.getMetricsAsJSON();
  return all.flatMap((x) => x.values.flatMap((v) => Object.values(v.labels as Labels).map(String)));
}

const RUN_ID = /r_[0-9a-f]{24}/;

let h: Harness;
let ledger: Ledger;
const runIds: string[] = [];
beforeAll(async () => {
  h = await createHarness('metrics', { RECONCILE_DEADLINE_MS: '1500', RECONCILE_POLL_MS: '50' });
  ledger = new Ledger(h.ctx.redis, h.ctx.keys);
  await h.startWorker();
});
afterAll(async () => {
  await h?.close();
});
beforeEach(() => h.sandbox.reset());

let seq = 0;
function specFor(script: Script) {
  const spec = buildSpec(
    h.ctx,
    { tenant: 'acme', ticket: sampleTicket(`M-${++seq}`), agent: { model: 'scripted', script } },
    Date.now(),
  );
  runIds.push(spec.runId);
  return spec;
}
async function run(script: Script, faults: FaultRule[] = []): Promise<string> {
  h.sandbox.setFaults(faults);
  const spec = specFor(script);
  await h.ctx.store.create(spec, Date.now());
  return spec.runId;
}

describe('metrics', () => {
  it('a clean run leaves agent_duplicate_writes_total at 0 and counts its effects once', async () => {
    const m = h.ctx.metrics;
    const names: [string, Labels?][] = [
      ['agent_effects_total', { tool: 'send_email', state: 'confirmed' }],
      ['agent_effects_total', { tool: 'create_ticket', state: 'confirmed' }],
      ['agent_ledger_dedupe_hits_total'],
    ];
    const before = await snapshot(m, names);
    const committedBefore = await value(m, 'agent_steps_committed_total');
    const runId = await run([t([ticketCall]), t([email]), final]);
    expect(await h.waitForStatus(runId, DONE)).toBe('completed');
    const after = await snapshot(m, names);
    expect(after.map((v, i) => v - before[i]!)).toEqual([1, 1, 0]);
    expect(await value(m, 'agent_duplicate_writes_total')).toBe(0);
    expect(await value(m, 'agent_steps_committed_total')).toBeGreaterThanOrEqual(committedBefore + 3);
  });

  it('a lost response after commit is reconciled by a same-key replay: outcome_unknown then confirmed, no duplicate counted', async () => {
    const m = h.ctx.metrics;
    const names: [string, Labels?][] = [
      ['agent_effects_total', { tool: 'send_email', state: 'outcome_unknown' }],
      ['agent_effects_total', { tool: 'send_email', state: 'confirmed' }],
      ['agent_duplicate_writes_total'],
      ['agent_ledger_dedupe_hits_total'],
    ];
    const before = await snapshot(m, names);
    const runId = await run(
      [t([email]), final],
      [{ kind: 'lost_response_after_commit', resource: 'emails', count: 1 }],
    );
    expect(await h.waitForStatus(runId, DONE)).toBe('completed');
    const after = await snapshot(m, names);
    expect(after.map((v, i) => v - before[i]!)).toEqual([1, 1, 0, 0]);
    expect(h.sandbox.counts().byResource.emails.records).toBe(1);
    const [effect] = await ledger.listForRun(runId);
    expect(effect?.history.at(-1)?.why).toMatch(/replay/);
  });

  it('a repeat of the same write in one run moves agent_ledger_dedupe_hits_total by exactly 1', async () => {
    const m = h.ctx.metrics;
    const names: [string, Labels?][] = [
      ['agent_ledger_dedupe_hits_total', { tool: 'send_email' }],
      ['agent_duplicate_writes_total'],
      ['agent_loop_stops_total'],
    ];
    const before = await snapshot(m, names);
    const runId = await run([t([email]), t([email]), final]);
    expect(await h.waitForStatus(runId, DONE)).toBe('completed');
    const after = await snapshot(m, names);
    expect(after.map((v, i) => v - before[i]!)).toEqual([1, 0, 0]);
    expect(h.sandbox.counts().byResource.emails.records).toBe(1);
  });

  it('a first dispatch the service answers with its replay marker moves agent_duplicate_writes_total{tool} by exactly 1', async () => {
    // Force the duplicate: the same action's request already reached Zendesk (a second sender with the
    // run's key, e.g. a lost ledger), so the ledger's first dispatch is answered `x-idempotency-lookup: hit`.
    const m = h.ctx.metrics;
    h.sandbox.setFaults([]);
    const spec = specFor([t([ticketCall]), final]);
    const createTicket = supportTool(h.ctx, 'create_ticket') as WriteTool;
    const id = actionIdentity(spec.runId, createTicket, ticketCall.args);
    const toolCtx = { runId: spec.runId, step: 1, signal: new AbortController().signal, input: spec.input };
    const first = await createTicket.dispatch(ticketCall.args, toolCtx, {
      actionId: id.actionId,
      idempotencyKey: id.idempotencyKey,
      requestId: 'rq_outside_the_ledger',
      timeoutMs: 5000,
      signal: toolCtx.signal,
    });
    expect(first.replayed).toBe(false);

    const names: [string, Labels?][] = [
      ['agent_duplicate_writes_total', { tool: 'create_ticket' }],
      ['agent_duplicate_writes_total', { tool: 'send_email' }],
      ['agent_ledger_dedupe_hits_total'],
    ];
    const before = await snapshot(m, names);
    await h.ctx.store.create(spec, Date.now());
    expect(await h.waitForStatus(spec.runId, DONE)).toBe('completed');
    const after = await snapshot(m, names);
    expect(after.map((v, i) => v - before[i]!)).toEqual([1, 0, 0]);
    const [effect] = await ledger.listForRun(spec.runId);
    expect(effect?.state).toBe('confirmed');
    expect(effect?.receipt).toBe(first.receipt);
    expect(h.sandbox.counts().byResource.tickets.records).toBe(1);
  });

  it('labels are bounded: no label value carries a run id (registry and the API /metrics text)', async () => {
    expect(runIds.length).toBeGreaterThan(0);
    const values = await labelValues(h.ctx.metrics);
    expect(values.length).toBeGreaterThan(0);
    for (const v of values) {
      expect(v).not.toMatch(RUN_ID);
      for (const id of runIds) expect(v).not.toContain(id);
    }
    const api = await h.startApi();
    const res = await fetch(`${api.url}/metrics`);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toMatch(/^agent_duplicate_writes_total\{tool="create_ticket"\} 1$/m);
    for (const id of runIds) expect(text).not.toContain(id);
    expect(text).not.toMatch(RUN_ID);
  });
});

describe('scrape-time gauges', () => {
  let hg: Harness;
  beforeAll(async () => {
    hg = await createHarness('metricsgauges', { RECONCILE_DEADLINE_MS: '200', RECONCILE_POLL_MS: '20' });
  });
  afterAll(async () => {
    await hg?.close();
  });

  it('start at 0 on an empty key space, with every queue state exported', async () => {
    const m = hg.ctx.metrics;
    for (const name of [
      'agent_outcome_unknown_open',
      'agent_outcome_unknown_oldest_age_seconds',
      'agent_human_queue_depth',
      'agent_human_queue_oldest_age_seconds',
      'agent_approvals_pending',
    ]) {
      expect(await value(m, name), name).toBe(0);
    }
    const queue = (await m.registry.getMetricsAsJSON()).find((x) => x.name === 'agent_queue_jobs');
    expect(queue?.values.map((v) => v.labels.state).sort()).toEqual([
      'active',
      'completed',
      'delayed',
      'failed',
      'waiting',
    ]);
    expect(queue?.values.every((v) => v.value === 0)).toBe(true);
  });

  it('count a waiting step job before any worker runs', async () => {
    const m = hg.ctx.metrics;
    hg.sandbox.setFaults([]);
    const spec = buildSpec(
      hg.ctx,
      { tenant: 'acme', ticket: sampleTicket('G-0'), agent: { model: 'scripted', script: [final] } },
      Date.now(),
    );
    await hg.ctx.store.create(spec, Date.now());
    expect(await value(m, 'agent_queue_jobs', { state: 'waiting' })).toBe(1);
    await hg.startWorker();
    expect(await hg.waitForStatus(spec.runId, DONE)).toBe('completed');
    expect(await value(m, 'agent_queue_jobs', { state: 'waiting' })).toBe(0);
    // The run's last commit drops its step jobs (nothing reads them after the run ends): none stays completed.
    expect(await value(m, 'agent_queue_jobs', { state: 'completed' })).toBe(0);
  });

  it('show a human-queue depth of 1 after a needs_human case, on the registry and on the API /metrics', async () => {
    const m = hg.ctx.metrics;
    hg.sandbox.setFaults([
      { kind: 'lost_response_after_commit', resource: 'emails', count: 1 },
      { kind: 'no_lookup', resource: 'emails' },
    ]);
    const spec = buildSpec(
      hg.ctx,
      { tenant: 'acme', ticket: sampleTicket('G-1'), agent: { model: 'scripted', script: [t([email]), final] } },
      Date.now(),
    );
    await hg.ctx.store.create(spec, Date.now());
    expect(await hg.waitForStatus(spec.runId, DONE)).toBe('needs_human');

    expect(await value(m, 'agent_human_queue_depth')).toBe(1);
    const age = await value(m, 'agent_human_queue_oldest_age_seconds');
    expect(age).toBeGreaterThanOrEqual(0);
    expect(age).toBeLessThan(60);
    // needs_human leaves the open-actions index.
    expect(await value(m, 'agent_outcome_unknown_open')).toBe(0);
    expect(await value(m, 'agent_outcome_unknown_oldest_age_seconds')).toBe(0);
    expect(await value(m, 'agent_approvals_pending')).toBe(0);
    expect(await value(m, 'agent_duplicate_writes_total')).toBe(0);
    expect(await value(m, 'agent_scrape_collect_errors_total')).toBe(0);

    const api = await hg.startApi();
    const text = await (await fetch(`${api.url}/metrics`)).text();
    expect(text).toMatch(/^agent_human_queue_depth 1$/m);
    expect(text).toMatch(/^agent_outcome_unknown_open 0$/m);
    expect(text).toMatch(/^agent_queue_jobs\{state="waiting"\} 0$/m);
    expect(text).not.toContain(spec.runId);
    for (const v of await labelValues(m)) expect(v).not.toMatch(RUN_ID);
  });

  it('report the age of the oldest open action from its zset score', async () => {
    // An outcome_unknown entry 120 s old, written straight into the shard's open-actions index.
    const m = hg.ctx.metrics;
    const key = hg.ctx.keys.openActions(0);
    await hg.ctx.redis.zadd(key, Date.now() - 120_000, 'a_test_old', Date.now() - 5_000, 'a_test_new');
    try {
      expect(await value(m, 'agent_outcome_unknown_open')).toBe(2);
      const age = await value(m, 'agent_outcome_unknown_oldest_age_seconds');
      expect(age).toBeGreaterThanOrEqual(120);
      expect(age).toBeLessThan(180);
    } finally {
      await hg.ctx.redis.zrem(key, 'a_test_old', 'a_test_new');
    }
  });
});

describe('scrape-time gauges when Redis fails', () => {
  it('do not fail the scrape: counters are still exported and the failure is counted per collector', async () => {
    const m = newMetrics();
    const boom = () => {
      throw new Error('redis down');
    };
    const ctx = {
      redis: { pipeline: boom },
      keys: new KeySpace('tfail', 'tfailb', 2),
      queues: { all: () => [{ getJobCounts: async () => boom() }] },
      log: createLogger('metrics-fail', 'silent'),
    } as unknown as Parameters<typeof registerScrapeCollectors>[1];
    const gauges = registerScrapeCollectors(m, ctx);
    expect(registerScrapeCollectors(m, ctx)).toBe(gauges);
    m.duplicateWrites.inc({ tool: 'send_email' });
    const text = await m.registry.metrics();
    expect(text).toMatch(/^agent_duplicate_writes_total\{tool="send_email"\} 1$/m);
    // One scrape: each of the nine gauges failed once (read the counter without scraping again).
    const errors = (await m.scrapeErrors.get()).values;
    expect(Object.fromEntries(errors.map((v) => [v.labels.collector, v.value]))).toEqual({
      queue_jobs: 1,
      outcome_unknown_open: 1,
      outcome_unknown_oldest_age: 1,
      human_queue_depth: 1,
      human_queue_oldest_age: 1,
      approvals_pending: 1,
      archive_lag: 1,
      compaction_lag: 1,
      version_parked_runs: 1,
    });
  });
});
