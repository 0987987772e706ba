/**
 * Section "intake": how many runs one API process (src/server/api.ts) creates per second, no workers running.
 * A client in the bench process keeps N requests in flight over keep-alive connections, each a `POST /v1/runs` with
 * its own Idempotency-Key and a full support-agent input, authenticated, validated, answered `201` only once the run,
 * its journal head, its admission and its step job are in Redis, exactly as a producer's request is. Reported per
 * level of concurrency: runs created per second, the request's latency (p50/p99) and the API process's CPU per
 * create (its utime + stime from /proc, so the client's own work is not counted).
 */
import { Agent, request } from 'node:http';
import { readFileSync } from 'node:fs';
import { spawnApi } from '../../testkit/processes.js';
import { PRODUCER_TOKEN } from '../../testkit/harness.js';
import { dist, round } from '../lib/stats.js';
import {
  type BenchEnv,
  type BenchOptions,
  type Metric,
  type Section,
  type SectionResult,
  atLeast,
  atMost,
} from '../lib/types.js';

/** CPU seconds (user + system) a process has used so far, from /proc/<pid>/stat (clock ticks of 10 ms). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  // After "pid (comm) ", utime and stime are fields 12 and 13 (0-based, counting from the state field).
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

interface Level {
  inFlight: number;
  runs: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  cpuMsPerCreate: number;
  statuses: Record<string, number>;
}

function body(i: number, tag: string): string {
  return JSON.stringify({
    tenant: 'acme',
    agent: 'support',
    input: {
      id: `${tag}-${i}`,
      subject: 'My order arrived broken',
      body: 'The mug was shattered when I opened the box. Could you send a new one, or refund me?',
      customer: { email: `c${i}@example.com`, name: `Customer ${i}` },
    },
  });
}

/** Sends `runs` creations keeping `inFlight` outstanding; resolves with each one's latency and status. */
async function load(url: URL, agent: Agent, runs: number, inFlight: number, tag: string) {
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let next = 0;
  const one = (i: number) =>
    new Promise<void>((resolve, reject) => {
      const payload = body(i, tag);
      const t0 = performance.now();
      const req = request(
        {
          host: url.hostname,
          port: url.port,
          path: '/v1/runs',
          method: 'POST',
          agent,
          headers: {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(payload),
            authorization: `Bearer ${PRODUCER_TOKEN}`,
            'idempotency-key': `${tag}-${i}`,
          },
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
      req.end(payload);
    });
  const lane = async () => {
    while (next < runs) await one(next++);
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: inFlight }, lane));
  return { seconds: (performance.now() - t0) / 1000, latencies, statuses };
}

export const intake: Section = {
  name: 'intake',
  title: 'Intake: runs created per second by one API process, no workers (POST /v1/runs over keep-alive)',
  async run(env: BenchEnv, opts: BenchOptions): Promise<SectionResult> {
    const runs = opts.quick ? 600 : 4000;
    const api = await spawnApi(
      { ...env.appEnv, PRODUCER_TOKEN },
      {
        keep: 'lifecycle',
        ...(opts.cpuProfDir ? { nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${opts.cpuProfDir}`] } : {}),
      },
    );
    env.onCleanup(async () => {
      if (api.child.exitCode === null) {
        api.child.kill('SIGTERM');
        await api.exited;
      }
    });
    const url = new URL(api.url);
    const agent = new Agent({ keepAlive: true, maxSockets: 64 });
    env.onCleanup(() => agent.destroy());
    // Warm-up: the API's first requests compile its routes, schemas and scripts.
    await load(url, agent, opts.quick ? 200 : 1000, 10, 'warm');
    const levels: Level[] = [];
    for (const inFlight of [10, 50]) {
      for (let r = 0; r < Math.max(1, opts.rounds); r++) {
        await env.reset();
        const cpu0 = cpuSeconds(api.child.pid!);
        const { seconds, latencies, statuses } = await load(url, agent, runs, inFlight, `in${inFlight}r${r}`);
        const cpu = cpuSeconds(api.child.pid!) - cpu0;
        const d = dist(latencies);
        levels.push({
          inFlight,
          runs,
          perSecond: round(runs / seconds, 0),
          p50Ms: round(d.p50, 1),
          p99Ms: round(d.p99, 1),
          cpuMsPerCreate: round((cpu * 1000) / runs, 3),
          statuses,
        });
      }
    }
    // The median round of each level by rate (its own latency and CPU with it), not the best.
    const medianRound = (n: number) => {
      const of = levels.filter((l) => l.inFlight === n).sort((a, b) => a.perSecond - b.perSecond);
      return of[Math.floor(of.length / 2)]!;
    };
    const at50 = medianRound(50);
    const at10 = medianRound(10);
    const metrics: Metric[] = [
      atLeast('intake.perSecond.50', 'runs created per second, 50 in flight', at50.perSecond, '/s', 2000),
      atMost('intake.p99.50', 'request p99, 50 in flight', at50.p99Ms, 'ms', 50),
      { key: 'intake.p50.50', label: 'request p50, 50 in flight', value: at50.p50Ms, unit: 'ms' },
      { key: 'intake.cpu', label: 'API CPU per create', value: at50.cpuMsPerCreate, unit: 'ms' },
      { key: 'intake.perSecond.10', label: 'runs created per second, 10 in flight', value: at10.perSecond, unit: '/s' },
      { key: 'intake.p50.10', label: 'request p50, 10 in flight', value: at10.p50Ms, unit: 'ms' },
    ];
    return {
      name: 'intake',
      title: intake.title,
      metrics,
      tables: [
        {
          title: 'every round (the median round of each level by rate is reported above)',
          header: ['in flight', 'runs', 'runs/s', 'p50 ms', 'p99 ms', 'API CPU ms/create', 'statuses'],
          rows: levels.map((l) => [
            l.inFlight,
            l.runs,
            l.perSecond,
            l.p50Ms,
            l.p99Ms,
            l.cpuMsPerCreate,
            JSON.stringify(l.statuses),
          ]),
        },
      ],
      details: { levels },
    };
  },
};
