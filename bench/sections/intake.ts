/**
 * Section "intake": what one API process (src/server/api.ts) spends on each body a producer sends, no workers
 * running. A client in the bench process keeps 50 requests in flight over keep-alive connections; every request is
 * authenticated (a producer token or a webhook signature), validated and answered `201` only once the run, its
 * journal head, its admission and its step job are in Redis, exactly as a producer's request is. The bodies:
 *
 *  - `agent+key`: `POST /v1/runs {tenant, agent, input}` with an Idempotency-Key;
 *  - `agent`: the same body without one (each request a new subject, so each one creates);
 *  - `ticket`: the support agent's shorthand `{tenant, ticket}` without a key, what a support system's integration
 *    sends;
 *  - `zendesk`: a signed Zendesk trigger for a new ticket (`POST /webhooks/zendesk/<tenant>`; its event id is the
 *    body's digest);
 *  - `tickets`: a signed ticket event (`POST /webhooks/tickets/<tenant>`, `{v: 1, eventId, ticket}`; the event is
 *    offered to a run waiting on the ticket's reply key first, and starts a run when none waits).
 *
 * Each round measures every body in turn (the same sitting for all of them). Reported per body, the median over the
 * rounds: runs created per second, the request's p50 and p99, and the API process's CPU per create (its utime + stime
 * from /proc, so the client's own work, signing included, is not counted). Once per body, 200 creates are traced
 * with MONITOR: the Redis commands the API sends per create (a script's own calls not counted).
 * BENCH_INTAKE_BODIES=ticket,zendesk measures only those bodies (with --cpu-prof: one body's profile).
 */
import { Agent, request } from 'node:http';
import { spawnApi } from '../../testkit/processes.js';
import { PRODUCER_TOKEN } from '../../testkit/harness.js';
import { sign, SIGNATURE_HEADER, TIMESTAMP_HEADER } from '../../src/producer/webhookSignature.js';
import { captureCommands } from '../lib/monitorTrace.js';
import { dist, median, round } from '../lib/stats.js';
import {
  type BenchEnv,
  type BenchOptions,
  type Metric,
  type Section,
  type SectionResult,
  atLeast,
  atMost,
} from '../lib/types.js';
import { cpuSeconds } from '../lib/processCpu.js';

export const TENANT = 'acme';
export const WEBHOOK_SECRET = 'bench-webhook-secret';
const IN_FLIGHT = 50;
const TRACED = 200;

interface Req {
  path: string;
  payload: string;
  headers: Record<string, string>;
}

/** A body a producer sends: its request for the i-th create of a round tagged `tag` (every one a new run). */
export interface IntakeBody {
  name: string;
  label: string;
  request(i: number, tag: string): Req;
}

const ticket = (i: number, tag: string) => ({
  id: `${tag}-${i}`,
  subject: 'My order arrived broken',
  body: 'The mug was shattered when I opened the box. Could you send a new one, or refund me?',
  customer: { email: `c${i}@example.com`, name: `Customer ${i}` },
});

const api = (payload: object, key?: string): Req => ({
  path: '/v1/runs',
  payload: JSON.stringify(payload),
  headers: { authorization: `Bearer ${PRODUCER_TOKEN}`, ...(key !== undefined ? { 'idempotency-key': key } : {}) },
});

/** A webhook request signed as its sender signs it: HMAC over the timestamp and the raw body. */
const signed = (hook: string, payload: object): Req => {
  const raw = JSON.stringify(payload);
  const timestamp = String(Math.floor(Date.now() / 1000));
  return {
    path: `/webhooks/${hook}/${TENANT}`,
    payload: raw,
    headers: { [SIGNATURE_HEADER]: sign(WEBHOOK_SECRET, timestamp, raw), [TIMESTAMP_HEADER]: timestamp },
  };
};

export const INTAKE_BODIES: IntakeBody[] = [
  {
    name: 'agent+key',
    label: 'agent + input, Idempotency-Key',
    request: (i, tag) => api({ tenant: TENANT, agent: 'support', input: ticket(i, tag) }, `${tag}-${i}`),
  },
  {
    name: 'agent',
    label: 'agent + input, no key',
    request: (i, tag) => api({ tenant: TENANT, agent: 'support', input: ticket(i, tag) }),
  },
  {
    name: 'ticket',
    label: 'ticket shorthand, no key',
    request: (i, tag) => api({ tenant: TENANT, ticket: ticket(i, tag) }),
  },
  {
    name: 'zendesk',
    label: 'signed Zendesk trigger (new ticket)',
    request: (i, tag) => {
      const t = ticket(i, tag);
      return signed('zendesk', {
        ticket: { id: t.id, subject: t.subject, description: t.body, requester: t.customer },
      });
    },
  },
  {
    name: 'tickets',
    label: 'signed ticket event',
    request: (i, tag) => signed('tickets', { v: 1, eventId: `${tag}-${i}`, ticket: ticket(i, tag) }),
  },
];

interface Round {
  body: string;
  round: number;
  runs: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  cpuMsPerCreate: number;
  statuses: Record<string, number>;
}

/** Sends `runs` requests of `body` keeping `inFlight` outstanding; resolves with each one's latency and status. */
export async function load(url: URL, agent: Agent, body: IntakeBody, runs: number, inFlight: number, tag: string) {
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let next = 0;
  const one = (i: number) =>
    new Promise<void>((resolve, reject) => {
      const r = body.request(i, tag);
      const t0 = performance.now();
      const req = request(
        {
          host: url.hostname,
          port: url.port,
          path: r.path,
          method: 'POST',
          agent,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(r.payload), ...r.headers },
        },
        (res) => {
          res.resume();
          res.on('end', () => {
            latencies.push(performance.now() - t0);
            const s = String(res.statusCode);
            statuses[s] = (statuses[s] ?? 0) + 1;
            resolve();
          });
        },
      );
      req.on('error', reject);
      req.end(r.payload);
    });
  const lane = async () => {
    while (next < runs) await one(next++);
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: inFlight }, lane));
  return { seconds: (performance.now() - t0) / 1000, latencies, statuses };
}

/** The Redis commands the API sends per create of `body`, by name (MONITOR; a script's own calls are not listed). */
async function commandsPerCreate(env: BenchEnv, url: URL, agent: Agent, body: IntakeBody): Promise<string> {
  await env.reset();
  const capture = await captureCommands(env.redis.port);
  await load(url, agent, body, TRACED, 10, `trace-${body.name}`);
  const seen = await capture.stop();
  const byName = new Map<string, number>();
  for (const c of seen) {
    const name = c.args[0]!.toString('latin1').toLowerCase();
    byName.set(name, (byName.get(name) ?? 0) + 1);
  }
  const total = seen.length / TRACED;
  const parts = [...byName].sort((a, b) => b[1] - a[1]).map(([n, k]) => `${n} ${round(k / TRACED, 2)}`);
  return `${round(total, 2)} (${parts.join(', ')})`;
}

/** The bodies to measure: all, or those BENCH_INTAKE_BODIES names. */
function selected(): IntakeBody[] {
  const names = process.env.BENCH_INTAKE_BODIES?.split(',').map((n) => n.trim());
  if (!names) return INTAKE_BODIES;
  const unknown = names.filter((n) => !INTAKE_BODIES.some((b) => b.name === n));
  if (unknown.length > 0)
    throw new Error(
      `BENCH_INTAKE_BODIES: unknown ${unknown.join(', ')}; known: ${INTAKE_BODIES.map((b) => b.name).join(', ')}`,
    );
  return INTAKE_BODIES.filter((b) => names.includes(b.name));
}

export const intake: Section = {
  name: 'intake',
  title: 'Intake: API CPU per create and runs created per second for each body a producer sends (one API process)',
  async run(env: BenchEnv, opts: BenchOptions): Promise<SectionResult> {
    const runs = opts.quick ? 600 : 4000;
    const bodies = selected();
    const proc = await spawnApi(
      { ...env.appEnv, PRODUCER_TOKEN, WEBHOOK_SECRETS: JSON.stringify({ [TENANT]: WEBHOOK_SECRET }) },
      {
        keep: 'lifecycle',
        ...(opts.cpuProfDir ? { nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${opts.cpuProfDir}`] } : {}),
      },
    );
    env.onCleanup(async () => {
      if (proc.child.exitCode === null) {
        proc.child.kill('SIGTERM');
        await proc.exited;
      }
    });
    const url = new URL(proc.url);
    const agent = new Agent({ keepAlive: true, maxSockets: 64 });
    env.onCleanup(() => agent.destroy());
    // Warm-up: the API's first requests of each route compile its routes, schemas and scripts.
    for (const body of bodies) await load(url, agent, body, opts.quick ? 200 : 1000, 10, `warm-${body.name}`);
    const commands = new Map<string, string>();
    for (const body of bodies) commands.set(body.name, await commandsPerCreate(env, url, agent, body));
    const rounds: Round[] = [];
    for (let r = 0; r < Math.max(1, opts.rounds); r++) {
      for (const body of bodies) {
        await env.reset();
        const cpu0 = cpuSeconds(proc.child.pid!);
        const tag = `${body.name}-r${r}`;
        const { seconds, latencies, statuses } = await load(url, agent, body, runs, IN_FLIGHT, tag);
        const cpu = cpuSeconds(proc.child.pid!) - cpu0;
        const d = dist(latencies);
        rounds.push({
          body: body.name,
          round: r,
          runs,
          perSecond: round(runs / seconds, 0),
          p50Ms: round(d.p50, 1),
          p99Ms: round(d.p99, 1),
          cpuMsPerCreate: round((cpu * 1000) / runs, 3),
          statuses,
        });
      }
    }
    const summary = bodies.map((body) => {
      const of = rounds.filter((x) => x.body === body.name);
      return {
        body,
        perSecond: median(of.map((x) => x.perSecond)),
        p50Ms: median(of.map((x) => x.p50Ms)),
        p99Ms: median(of.map((x) => x.p99Ms)),
        cpuMsPerCreate: round(median(of.map((x) => x.cpuMsPerCreate)), 3),
        created: of.every((x) => x.statuses['201'] === x.runs),
      };
    });
    const metrics: Metric[] = summary.flatMap((s) => [
      atMost(`intake.${s.body.name}.cpu`, `${s.body.label}: API CPU per create`, s.cpuMsPerCreate, 'ms', 0.35),
      atLeast(`intake.${s.body.name}.perSecond`, `${s.body.label}: creates per second`, s.perSecond, '/s', 2000),
      atMost(`intake.${s.body.name}.p99`, `${s.body.label}: request p99`, s.p99Ms, 'ms', 50),
    ]);
    return {
      name: 'intake',
      title: intake.title,
      metrics,
      tables: [
        {
          title: `per body, ${IN_FLIGHT} in flight, median of ${Math.max(1, opts.rounds)} round(s) of ${runs}`,
          header: ['body', 'API CPU ms/create', 'creates/s', 'p50 ms', 'p99 ms', 'all 201', 'Redis commands/create'],
          rows: summary.map((s) => [
            s.body.name,
            s.cpuMsPerCreate,
            s.perSecond,
            s.p50Ms,
            s.p99Ms,
            s.created ? 'yes' : 'NO',
            commands.get(s.body.name) ?? '',
          ]),
        },
        {
          title: 'every round',
          header: ['round', 'body', 'runs', 'runs/s', 'p50 ms', 'p99 ms', 'API CPU ms/create', 'statuses'],
          rows: rounds.map((x) => [
            x.round,
            x.body,
            x.runs,
            x.perSecond,
            x.p50Ms,
            x.p99Ms,
            x.cpuMsPerCreate,
            JSON.stringify(x.statuses),
          ]),
        },
      ],
      details: { rounds, commandsPerCreate: Object.fromEntries(commands) },
    };
  },
};
