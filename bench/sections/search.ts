/**
 * Section "search": finding runs by what people know (src/runs/search.ts) in a Redis holding 100,000 runs
 * (`--quick`: 10,000), and what indexing costs a run's creation.
 *
 * The runs are support-agent runs of 2 tenants: 20,000 customers (5 runs each) and 50,000 tickets (2 runs each:
 * a ticket's second run is a follow-up). The queries, each a page of 50, one at a time, in the bench process (the
 * engine's own read, without HTTP): by subject, by customer, by a custom field (`ticket`), by customer and subject
 * together, each as an operator of every tenant (the any-tenant index) and as one tenant. Reported: p50 and p99
 * latency over all of them (target p99 < 20 ms).
 *
 * Indexing happens once per run, in createRun (never per step: commitStep is unchanged but for the run's end,
 * when the indexes get their TTL once their last run ended): so its cost is a create's, measured as the mean wall
 * time of sequential creates and Redis' own time per createRun call (INFO commandstats), with the indexes on and off
 * (a RunStore that writes none), alternating rounds.
 */
import { RunStore } from '../../src/runs/store.js';
import { buildSpec } from '../../src/producer/intake.js';
import { searchRuns, type SearchTerm } from '../../src/runs/search.js';
import { SEARCH_SUBJECT } from '../../src/store/keys.js';
import type { RunSpec } from '../../src/runs/spec.js';
import { dist, median, round } from '../lib/stats.js';
import {
  type BenchEnv,
  type BenchOptions,
  type Metric,
  type Section,
  type SectionResult,
  atMost,
} from '../lib/types.js';

const TENANTS = ['acme', 'globex'];

function specOf(env: BenchEnv, i: number, tag: string, customers: number, event?: string): RunSpec {
  const ticket = Math.floor(i / 2);
  return buildSpec(
    env.ctx,
    {
      tenant: TENANTS[ticket % TENANTS.length]!,
      agent: 'support',
      input: {
        id: `${tag}-T${ticket}`,
        subject: 'My order arrived broken',
        body: 'The mug was shattered when I opened the box.',
        customer: { email: `c${i % customers}@example.com`, name: `Customer ${i % customers}` },
      },
    },
    Date.now(),
    event ?? `e${i}`,
  );
}

/** Creates runs `from`..`to` with `inFlight` creates outstanding. */
async function fill(env: BenchEnv, store: RunStore, from: number, to: number, tag: string, customers: number) {
  let next = from;
  const lane = async () => {
    while (next < to) {
      const i = next++;
      await store.create(specOf(env, i, tag, customers), Date.now());
    }
  };
  await Promise.all(Array.from({ length: 64 }, lane));
}

/** Mean ms per sequential create, and Redis' µs per EVALSHA over them (createRun is the only script sent). */
async function createCost(env: BenchEnv, store: RunStore, n: number, tag: string) {
  const specs = Array.from({ length: n }, (_, i) => specOf(env, i, tag, n));
  await env.admin.config('RESETSTAT');
  const t0 = performance.now();
  for (const spec of specs) await store.create(spec, Date.now());
  const ms = (performance.now() - t0) / n;
  const stats = await env.admin.info('commandstats');
  const m = /cmdstat_evalsha:calls=(\d+),usec=(\d+)/.exec(stats);
  return { ms, redisUs: m ? Number(m[2]) / Number(m[1]) : NaN };
}

export const search: Section = {
  name: 'search',
  title:
    'Search: runs found by subject, customer or an agent field among 100,000 runs; the per-create cost of indexing',
  async run(env: BenchEnv, opts: BenchOptions): Promise<SectionResult> {
    const runs = opts.quick ? 10_000 : 100_000;
    const customers = runs / 5;
    await env.reset();
    const store = env.ctx.store;
    const t0 = performance.now();
    await fill(env, store, 0, runs, 'S', customers);
    const fillSeconds = (performance.now() - t0) / 1000;

    const queries = opts.quick ? 400 : 2000;
    const kinds: Record<string, number[]> = { subject: [], customer: [], field: [], 'customer+subject': [] };
    const found: number[] = [];
    for (let q = 0; q < queries; q++) {
      const i = Math.floor(Math.random() * runs);
      const ticket = `S-T${Math.floor(i / 2)}`;
      const customer = `c${i % customers}@example.com`;
      const kind = Object.keys(kinds)[q % 4]!;
      const terms: SearchTerm[] =
        kind === 'subject'
          ? [{ field: SEARCH_SUBJECT, value: ticket }]
          : kind === 'customer'
            ? [{ field: 'customer', value: customer }]
            : kind === 'field'
              ? [{ field: 'ticket', value: ticket }]
              : [
                  { field: 'customer', value: customer },
                  { field: SEARCH_SUBJECT, value: ticket },
                ];
      const scoped = q % 2 === 0 ? { tenants: [TENANTS[Math.floor(i / 2) % 2]!] } : {};
      const s0 = performance.now();
      const page = await searchRuns(env.ctx.redis, env.ctx.keys, { terms, limit: 50, ...scoped });
      kinds[kind]!.push(performance.now() - s0);
      found.push(page.runs.length);
    }
    const all = dist(Object.values(kinds).flat());

    // Per-create cost, indexes on and off, alternating rounds on an empty Redis.
    const off = new RunStore(
      env.ctx.redis,
      env.ctx.keys,
      env.ctx.queues,
      env.cfg.EVENTS_MAX_LEN,
      env.cfg.SUBJECT_LINK_TTL_MS,
      false,
    );
    const n = opts.quick ? 500 : 3000;
    const on: { ms: number; redisUs: number }[] = [];
    const without: { ms: number; redisUs: number }[] = [];
    for (let r = 0; r < Math.max(3, opts.rounds); r++) {
      await env.reset();
      without.push(await createCost(env, off, n, `off${r}`));
      await env.reset();
      on.push(await createCost(env, store, n, `on${r}`));
    }
    const medOf = (xs: { ms: number; redisUs: number }[], f: 'ms' | 'redisUs') => median(xs.map((x) => x[f]));
    const metrics: Metric[] = [
      atMost('search.p99', `search p99 (page of 50) among ${runs} runs`, round(all.p99, 2), 'ms', 20),
      { key: 'search.p50', label: `search p50 among ${runs} runs`, value: round(all.p50, 2), unit: 'ms' },
      {
        key: 'search.found',
        label: 'runs found per query (mean)',
        value: round(found.reduce((a, b) => a + b, 0) / found.length, 1),
        unit: 'runs',
      },
      {
        key: 'search.create.on',
        label: 'create, indexes on (sequential, mean)',
        value: round(medOf(on, 'ms'), 3),
        unit: 'ms',
      },
      {
        key: 'search.create.off',
        label: 'create, indexes off (sequential, mean)',
        value: round(medOf(without, 'ms'), 3),
        unit: 'ms',
      },
      {
        key: 'search.createRedis.on',
        label: 'Redis time per createRun, indexes on',
        value: round(medOf(on, 'redisUs'), 1),
        unit: 'µs',
      },
      {
        key: 'search.createRedis.off',
        label: 'Redis time per createRun, indexes off',
        value: round(medOf(without, 'redisUs'), 1),
        unit: 'µs',
      },
      { key: 'search.fill', label: `${runs} runs created (64 in flight)`, value: round(fillSeconds, 1), unit: 's' },
    ];
    return {
      name: 'search',
      title: search.title,
      metrics,
      tables: [
        {
          title: 'latency by query kind (ms)',
          header: ['kind', 'queries', 'p50', 'p99'],
          rows: Object.entries(kinds).map(([k, xs]) => [k, xs.length, round(dist(xs).p50, 2), round(dist(xs).p99, 2)]),
        },
        {
          title: 'per-create cost by round (indexes off / on)',
          header: ['round', 'off ms', 'on ms', 'off Redis µs', 'on Redis µs'],
          rows: on.map((x, r) => [
            r,
            round(without[r]!.ms, 3),
            round(x.ms, 3),
            round(without[r]!.redisUs, 1),
            round(x.redisUs, 1),
          ]),
        },
      ],
      details: { kinds: Object.fromEntries(Object.entries(kinds).map(([k, xs]) => [k, dist(xs)])), on, off: without },
    };
  },
};
