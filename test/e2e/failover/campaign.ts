/**
 * The failover campaign: the fleet (an API, two workers and a reconciler, real processes) on a replicated Redis
 * (testkit/sentinel.ts: a master, two replicas, three sentinels), the support agent's writes going to the sandbox
 * (which counts emails per recipient and tickets per source ticket), and a model stand-in that answers differently
 * every time it is asked (another template, another ticket subject, another wording, at random). A client submits
 * runs all along and retries a 503 or a dropped connection with the same Idempotency-Key. Meanwhile the master is
 * SIGKILLed `kills` times; the sentinels promote a replica; the old master restarts and rejoins as a replica.
 *
 * `lag`: before each kill the replicas fall behind (SIGSTOP, then a large write fills the replication link's
 * socket buffers, so the master's later writes exist only in its own output buffer) and stay behind for `lagMs`
 * of load; the kill then loses every write of that window the master acknowledged. The replicas resume right
 * after the kill (one of them is promoted). With REDIS_MIN_REPLICAS=0 (no wait: the engine without this change)
 * acknowledged runs vanish and lost decisions are asked again; with 1 nothing acknowledged is lost.
 *
 * Run alone: `npx tsx test/e2e/failover/campaign.ts [--store=sentinel|cluster] [--replicas=0|1] [--lag] [--kills=3]
 * [--lag-ms=1500] [--rate=20] [--flow=false] [--min-acked=0]` (`--flow` absent: flow control's default, on).
 */
import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { Redis, Cluster } from 'ioredis';
import { startSandbox } from '../../../sandbox/server.js';
import { startOpenAIServer } from '../../../testkit/modelServers/openai.js';
import type { RecordedRequest, Reply } from '../../../testkit/modelServers/queue.js';
import type { ChildProcess } from 'node:child_process';
import { startLocalSentinel, SENTINEL_MASTER } from '../../../testkit/sentinel.js';
import { startReplicatedCluster } from '../../../testkit/replicatedCluster.js';
import { KeySpace } from '../../../src/store/keys.js';
import { spawnApi, spawnReconciler, spawnWorker, type SpawnedProcess } from '../../../testkit/processes.js';
import { until } from '../../../testkit/until.js';

export interface CampaignOptions {
  /** Where the fleet's data lives: a master with two replicas and three Sentinels, or a Cluster of 3 masters, 3 replicas. */
  store?: 'sentinel' | 'cluster';
  /** REDIS_MIN_REPLICAS of every process. */
  minReplicas: number;
  /** FLOW_CONTROL of every process; absent: the default (on). */
  flowControl?: boolean;
  lag: boolean;
  kills: number;
  lagMs: number;
  /** Runs submitted per second. */
  rate: number;
  /**
   * After the last kill, submitting goes on until this many runs were acknowledged in all (at most 60 s more): on a
   * slow machine the replicas take longer to catch up after the failover, creates wait for them (REDIS_MIN_REPLICAS)
   * and are answered 503 meanwhile, and a fixed window acknowledged too few runs to say anything.
   */
  minAcknowledged?: number;
  log?: (line: string) => void;
}

export interface CampaignResult {
  minReplicas: number;
  lag: boolean;
  kills: number;
  submitted: number;
  /** Runs answered 201 (or 200 for a retried request whose run existed). */
  acknowledged: number;
  answered503: number;
  answered500: number;
  /** The API's logged errors behind its 500s (`api_error` lines, the last five): a CI run names the cause. */
  apiErrors: string[];
  /** Acknowledged runs the store no longer has at the end. */
  vanished: number;
  /** Acknowledged runs not in a terminal status at the end. */
  notTerminal: number;
  statuses: Record<string, number>;
  /** Recipients that got more than one email, tickets with more than one follow-up, sandbox duplicates by key. */
  duplicateEmails: number;
  duplicateTickets: number;
  duplicateKeys: number;
  emails: number;
  /** Per kill: ms from the SIGKILL to the first step committed afterwards (agent_steps_committed_total moved). */
  recoveryMs: number[];
}

/** SHARDS of the fleet on the Cluster (spread over its three masters). */
const CLUSTER_SHARDS = 16;
const TERMINAL = new Set(['completed', 'failed', 'cancelled', 'budget_exceeded', 'needs_human']);
const PRODUCER_TOKEN = 'failover-producer-token';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(Math.random() * xs.length)]!;

/** The model stand-in: the support flow, each answer drawn anew (a real model is not deterministic either). */
export function unsteadyModel(req: RecordedRequest): Reply {
  const messages = Array.isArray(req.body.messages)
    ? (req.body.messages as { role?: string; content?: unknown }[])
    : [];
  const prompt = String(messages.find((m) => m.role === 'user')?.content ?? '');
  const ticket = /^Ticket (\S+):/.exec(prompt)?.[1] ?? 'unknown';
  const email = /<([^>]+)>/.exec(prompt)?.[1] ?? 'nobody@example.com';
  const step = messages.filter((m) => m.role === 'assistant').length + 1;
  const usage = { input: 100, output: 20 };
  const nonce = randomBytes(3).toString('hex');
  if (step === 1) return { kind: 'turn', toolCalls: [{ name: 'read_ticket', args: {} }], usage };
  if (step === 2) {
    const subject = `Follow-up on ${ticket}: ${pick(['delivery', 'damage'])}`;
    return {
      kind: 'turn',
      toolCalls: [
        {
          name: 'create_ticket',
          args: { subject, body: `Opened ${nonce}`, priority: 'normal', sourceTicketId: ticket },
        },
      ],
      usage,
    };
  }
  if (step === 3) {
    const template = pick(['ticket_acknowledged', 'ticket_received']);
    return {
      kind: 'turn',
      toolCalls: [
        {
          name: 'send_email',
          args: { to: email, template, subject: `Re: ${ticket}`, body: `Hello, noted (${nonce}).` },
        },
      ],
      usage,
    };
  }
  return { kind: 'turn', text: `Done ${nonce}.`, usage };
}

/**
 * FAILOVER_KEEP_LOGS: every line each fleet process writes goes to a file of its own in one temp dir (named on the
 * campaign's output), where the campaign otherwise keeps only errors: a duplicate's post-mortem needs every
 * delivery of its step, from every worker. With SENTINEL_KEEP_DIR (the nodes' AOF) it is the whole record.
 */
const logDir = process.env.FAILOVER_KEEP_LOGS ? mkdtempSync(join(tmpdir(), 'failover-logs-')) : undefined;
function keepLog(name: string, stdout: Readable | null, stderr: Readable | null): void {
  if (!logDir) return;
  const out = createWriteStream(join(logDir, `${name}.log`), { flags: 'a' });
  stdout?.on('data', (d: Buffer) => out.write(d));
  stderr?.on('data', (d: Buffer) => out.write(d));
}

/** POST /v1/runs until an answer that is not a 503 / dropped connection (same Idempotency-Key each time). */
async function submit(api: string, i: number, tally: { s503: number; s500: number }): Promise<string | undefined> {
  const body = JSON.stringify({
    tenant: 'acme',
    ticket: {
      id: `F-${i}`,
      subject: 'Broken mug',
      body: 'It arrived shattered.',
      customer: { email: `c${i}@example.com`, name: `C${i}` },
    },
  });
  for (let attempt = 0; attempt < 200; attempt++) {
    try {
      const res = await fetch(`${api}/v1/runs`, {
        method: 'POST',
        body,
        headers: {
          'content-type': 'application/json',
          authorization: `Bearer ${PRODUCER_TOKEN}`,
          'idempotency-key': `ev-${i}`,
        },
        signal: AbortSignal.timeout(10_000),
      });
      const json = (await res.json().catch(() => ({}))) as { runId?: string };
      if (res.status === 201 || res.status === 200) return json.runId;
      if (res.status === 503) tally.s503++;
      else if (res.status >= 500) tally.s500++;
      else return undefined;
    } catch {
      // The connection dropped or timed out: retried like a 503.
    }
    await sleep(250); // the client's pause before it retries, as a producer's (the Retry-After is 1 s)
  }
  return undefined;
}

/** The last value of agent_steps_committed_total summed over the workers' /metrics (undefined: none answered). */
async function committedSteps(ports: number[]): Promise<number | undefined> {
  let sum = 0;
  let any = false;
  for (const port of ports) {
    const text = await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(1000) })
      .then((r) => r.text())
      .catch(() => '');
    const m = /^agent_steps_committed_total (\d+)/m.exec(text);
    if (m) {
      sum += Number(m[1]);
      any = true;
    }
  }
  return any ? sum : undefined;
}

/** A replicated Redis the campaign kills masters of: Sentinel-managed or a Cluster (the same steps on each). */
interface ReplicatedStore {
  /** The fleet's settings to reach it (REDIS_SENTINELS or REDIS_CLUSTER_NODES). */
  env: Record<string, string>;
  process(port: number): ChildProcess | undefined;
  /** The master to kill next (on a Cluster, one of the masters, in turn). */
  victim(k: number): Promise<number>;
  replicasOf(master: number): Promise<number[]>;
  kill(port: number): Promise<void>;
  waitForFailover(old: number): Promise<number>;
  /** Restarts a killed master and waits until it follows again (every master with its replicas online). */
  rejoin(port: number): Promise<void>;
  /** A key stored on `master` (the ballast that fills its replication links). */
  keyOn(master: number): Promise<string>;
  reader(): Redis | Cluster;
  allProcesses(): ChildProcess[];
  stop(): Promise<void>;
}

async function sentinelStore(): Promise<ReplicatedStore> {
  const s = await startLocalSentinel({ replicas: 2 });
  return {
    env: { REDIS_SENTINELS: s.sentinels.join(','), REDIS_SENTINEL_MASTER: SENTINEL_MASTER },
    process: (port) => s.nodes.get(port)?.process,
    victim: () => s.masterPort(),
    replicasOf: async (master) => [...s.nodes.keys()].filter((p) => p !== master),
    kill: (port) => s.kill(port, 'SIGKILL'),
    waitForFailover: (old) => s.waitForFailover(old),
    rejoin: async (port) => {
      await s.restart(port);
      await s.waitForReplicas(2, 60_000);
    },
    keyOn: async () => 'failover-campaign:ballast',
    reader: () =>
      new Redis({
        sentinels: s.sentinels.map((x) => ({ host: '127.0.0.1', port: Number(x.split(':')[1]) })),
        name: SENTINEL_MASTER,
      }),
    allProcesses: () => [...s.nodes.values()].map((n) => n.process),
    stop: () => s.stop(),
  };
}

async function clusterStore(): Promise<ReplicatedStore> {
  const c = await startReplicatedCluster({ masters: 3, nodeTimeoutMs: 2000 });
  return {
    env: { REDIS_CLUSTER_NODES: c.nodes.join(','), SHARDS: String(CLUSTER_SHARDS) },
    process: (port) => c.processes.get(port)?.process,
    victim: async (k) => {
      const masters = (await c.masters()).sort((a, b) => a - b);
      return masters[k % masters.length]!;
    },
    replicasOf: (master) => c.replicasOf(master),
    kill: (port) => c.kill(port, 'SIGKILL'),
    waitForFailover: (old) => c.waitForFailover(old),
    rejoin: async (port) => {
      await c.restart(port);
      await c.waitForReplicas();
    },
    keyOn: (master) => c.keyOn(master, 'failover-campaign:ballast'),
    reader: () => new Cluster(c.nodes.map((n) => ({ host: '127.0.0.1', port: Number(n.split(':')[1]) }))),
    allProcesses: () => [...c.processes.values()].map((n) => n.process),
    stop: () => c.stop(),
  };
}

/**
 * Each replica's replication offset right after the master's death (what it holds): a promoted replica with a smaller
 * offset than another has lost writes the other acknowledged.
 */
async function replicaOffsets(replicas: readonly number[]): Promise<Map<number, number>> {
  const out = new Map<number, number>();
  for (const p of replicas) {
    const c = new Redis({ port: p, host: '127.0.0.1', maxRetriesPerRequest: 1, connectTimeout: 1000 });
    c.on('error', () => {});
    const info = await c.info('replication').catch(() => '');
    c.disconnect();
    const m = /slave_repl_offset:(\d+)/.exec(info) ?? /master_repl_offset:(\d+)/.exec(info);
    out.set(p, m ? Number(m[1]) : -1);
  }
  return out;
}

async function fallBehind(store: ReplicatedStore, master: number): Promise<number[]> {
  const replicas = await store.replicasOf(master);
  for (const p of replicas) store.process(p)?.kill('SIGSTOP');
  // Fills the socket buffers of the replication links: what the master writes after it stays in its own buffers.
  const direct = new Redis({ port: master, host: '127.0.0.1', maxRetriesPerRequest: 1 });
  direct.on('error', () => {});
  await direct.set(await store.keyOn(master), Buffer.alloc(32 * 1024 * 1024, 1)).catch(() => {});
  direct.disconnect();
  return replicas;
}

export async function runFailoverCampaign(o: CampaignOptions): Promise<CampaignResult> {
  const log = o.log ?? (() => {});
  const store = o.store === 'cluster' ? await clusterStore() : await sentinelStore();
  const sandbox = await startSandbox({ port: 0 });
  const model = await startOpenAIServer();
  model.respond = unsteadyModel;
  const prefix = `fo${randomBytes(3).toString('hex')}`;
  // Every process binds port 0 and says which port it got: a port picked free beforehand was taken by another test
  // before the process bound it, once, under the full suite.
  const workerPorts: number[] = [];
  const env: Record<string, string> = {
    ...store.env,
    KEY_PREFIX: prefix,
    BULL_PREFIX: `${prefix}b`,
    SANDBOX_URL: sandbox.url,
    MODEL_PROVIDER: 'openai',
    OPENAI_BASE_URL: `${model.url}/v1`,
    OPENAI_API_KEY: 'sk-test',
    PRODUCER_TOKEN,
    ...(o.flowControl === undefined ? {} : { FLOW_CONTROL: String(o.flowControl) }),
    REDIS_MIN_REPLICAS: String(o.minReplicas),
    REDIS_REPLICA_WAIT_MS: '500',
    STORE_RETRY_AFTER_S: '1',
    LOCK_DURATION_MS: '4000',
    STALLED_INTERVAL_MS: '1000',
    STUCK_RUN_MIN_AGE_MS: '5000',
    RECONCILER_SWEEP_MS: '500',
    RECONCILER_MIN_AGE_MS: '1000',
    RETRY_BASE_MS: '50',
    RETRY_MAX_MS: '500',
    REDIS_BOOT_TIMEOUT_MS: '20000',
    PORT: '0',
    HOST: '127.0.0.1',
    RECONCILER_METRICS_PORT: '0',
    WORKER_CONCURRENCY: '10',
  };
  const procs: SpawnedProcess[] = [];
  const workers: SpawnedProcess[] = [];
  /** Per worker, its `fetch_loop_restarted` lines (the kept lines are only its start, shutdown and errors). */
  const fetchRestarts: string[][] = [];
  // However the campaign ends (a failed start, an interrupted run), nothing it started outlives it.
  const killAll = () => {
    for (const w of workers) w.child.kill('SIGKILL');
    for (const p of procs) p.child.kill('SIGKILL');
    for (const p of store.allProcesses()) {
      p.kill('SIGCONT');
      p.kill('SIGKILL');
    }
  };
  process.once('exit', killAll);
  try {
    return await campaign();
  } finally {
    killAll();
    process.off('exit', killAll);
    await Promise.all([...workers.map((w) => w.exited), ...procs.map((p) => p.exited)]);
    await model.close();
    await sandbox.close();
    await store.stop();
  }

  async function campaign(): Promise<CampaignResult> {
    if (logDir) log(`fleet logs kept: ${logDir}`);
    for (const i of [0, 1]) {
      const w = await spawnWorker(
        { ...env, WORKER_METRICS_PORT: '0' },
        {
          startTimeoutMs: 90_000,
          keep: 'lifecycle',
          exitBeforeStart: 'return',
          // Kept logs are at debug: each step's decision and commit, by run, step, job and attempt.
          ...(logDir ? { logLevel: 'debug' } : {}),
        },
      );
      keepLog(`worker-${i + 1}`, w.child.stdout, w.child.stderr);
      const restarts: string[] = [];
      fetchRestarts.push(restarts);
      w.child.stdout?.on('data', (d: Buffer) => {
        for (const l of d.toString().split('\n')) if (l.includes('"fetch_loop_restarted"')) restarts.push(l);
      });
      workers.push(w);
      const started = w.lines.find((l) => l.includes('"worker_started"'));
      if (started) workerPorts.push((JSON.parse(started) as { metricsPort: number }).metricsPort);
    }
    const apiProcess = await spawnApi(env, { startTimeoutMs: 60_000, keep: 'lifecycle' });
    keepLog('api', apiProcess.child.stdout, apiProcess.child.stderr);
    const reconciler = await spawnReconciler(env, { keep: 'lifecycle' });
    keepLog('reconciler', reconciler.child.stdout, reconciler.child.stderr);
    procs.push(apiProcess, reconciler);
    const api = apiProcess.url;
    const tally = { s503: 0, s500: 0 };
    const acked: string[] = [];
    let submitted = 0;
    let submitting = true;
    const pending: Promise<void>[] = [];
    const producer = (async () => {
      while (submitting) {
        const i = submitted++;
        pending.push(
          submit(api, i, tally).then((runId) => {
            if (runId) acked.push(runId);
          }),
        );
        await sleep(1000 / o.rate); // the campaign's schedule: `rate` submissions a second
      }
    })();
    const recoveryMs: number[] = [];
    try {
      await sleep(2000); // the campaign's schedule: load before the first kill
      for (let k = 0; k < o.kills; k++) {
        const master = await store.victim(k);
        const replicas = await store.replicasOf(master);
        let frozen: number[] = [];
        if (o.lag) {
          frozen = await fallBehind(store, master);
          await sleep(o.lagMs); // the replicas stay behind for lagMs of load: the behaviour under test
        }
        const before = await committedSteps(workerPorts);
        const killedAt = Date.now();
        await store.kill(master);
        for (const p of frozen) store.process(p)?.kill('SIGCONT');
        const offsets = await replicaOffsets(replicas);
        const promoted = await store.waitForFailover(master);
        log(
          `kill ${k + 1}: master ${master} SIGKILLed at ${killedAt}, ${promoted} promoted after ${Date.now() - killedAt} ms` +
            ` (replica offsets at the kill: ${[...offsets].map(([p, o]) => `${p}=${o}`).join(', ')})`,
        );
        // Steps flowing again: the committed-steps counter moves past its value at the kill.
        const flowing = async () => {
          const now = await committedSteps(workerPorts);
          if (process.env.FAILOVER_DEBUG) log(`committed ${now} (at kill ${before})`);
          return now !== undefined && before !== undefined && now > before;
        };
        // Not flowing within a minute: the recovery time says so (a minute), the checks below say what was lost.
        await until('steps flowing again', 60_000, flowing, 50).catch(() => {});
        recoveryMs.push(Date.now() - killedAt);
        await store.rejoin(master);
        log(`kill ${k + 1}: steps flowing ${recoveryMs.at(-1)} ms after the kill; old master rejoined`);
        await sleep(2000); // the campaign's schedule: load between kills
      }
      const enough = () => acked.length >= (o.minAcknowledged ?? 0);
      await until('enough runs acknowledged', 60_000, enough, 100).catch(() => {}); // too few: the test says so
    } finally {
      submitting = false;
      await producer;
      await Promise.all(pending);
    }
    // Every acknowledged run reaches a terminal status (or is gone: counted as vanished).
    const reader = store.reader();
    // Its reconnects while a node is down are expected; a read it is asked for fails by its promise.
    reader.on('error', () => {});
    const keys = new KeySpace(prefix, `${prefix}b`, o.store === 'cluster' ? CLUSTER_SHARDS : 1);
    const runKey = (runId: string) => keys.run(runId).run;
    const statusOf = async (runId: string) => (await reader.hget(runKey(runId), 'status')) ?? 'vanished';
    let statuses: string[] = [];
    const settled = async () => {
      statuses = await Promise.all(acked.map(statusOf));
      return statuses.every((s) => TERMINAL.has(s) || s === 'vanished');
    };
    // A run still at work after two minutes is reported below, with where its job is.
    await until('every acknowledged run terminal', 120_000, settled, 500).catch(() => {});
    // Each run left at work, with where its current job is: what a post-mortem starts from.
    for (const [i, runId] of acked.entries()) {
      if (TERMINAL.has(statuses[i]!) || statuses[i] === 'vanished') continue;
      const shard = keys.shardOf(runId);
      const [jobId, updatedAt] = await reader.hmget(runKey(runId), 'jobId', 'updatedAt');
      const q = keys.queueKeyPrefix(shard);
      const where = jobId
        ? await Promise.all([
            reader.exists(`${q}${jobId}`),
            reader.zscore(`${q}delayed`, jobId),
            reader.lpos(`${q}wait`, jobId),
            reader.lpos(`${q}active`, jobId),
            reader.zscore(`${q}prioritized`, jobId),
            reader.get(`${q}${jobId}:lock`),
          ])
        : [];
      const f = keys.flow();
      const flow = await Promise.all([
        reader.hget(f.waiting, runId),
        reader.hget(f.held, runId),
        reader.hget(f.pending, runId),
        reader.zscore(keys.flowLine('acme'), runId),
      ]);
      log(
        `not terminal: ${runId} shard ${shard} ${statuses[i]} job ${jobId} updated ${Date.now() - Number(updatedAt)} ms ago ` +
          `(exists, delayed, wait, active, prioritized, lock): ${JSON.stringify(where)}` +
          ` flow (waiting, held, pending, line): ${JSON.stringify(flow)}`,
      );
    }
    if (statuses.some((s) => !TERMINAL.has(s) && s !== 'vanished')) {
      // Each stuck run's shard queue as BullMQ's fetch sees it (a job ready in `wait` or `prioritized`, the marker
      // its workers block on), and the connections blocked on a marker on every master: a shard with jobs ready
      // and no worker blocked on its marker nor taking its jobs has no fetch loop left.
      const stuckShards = new Set(
        acked.filter((_, i) => !TERMINAL.has(statuses[i]!) && statuses[i] !== 'vanished').map((r) => keys.shardOf(r)),
      );
      for (const shard of stuckShards) {
        const q = keys.queueKeyPrefix(shard);
        const [wait, prioritized, active, marker, meta] = await Promise.all([
          reader.llen(`${q}wait`),
          reader.zcard(`${q}prioritized`),
          reader.llen(`${q}active`),
          reader.zrange(`${q}marker`, 0, -1, 'WITHSCORES'),
          reader.hgetall(`${q}meta`),
        ]);
        log(
          `shard ${shard} queue: wait ${wait} prioritized ${prioritized} active ${active} marker ${JSON.stringify(marker)}` +
            ` meta ${JSON.stringify(meta)}`,
        );
      }
      if (reader instanceof Cluster) {
        for (const node of reader.nodes('master')) {
          const list = String(await node.client('LIST'));
          const blocked = list.split('\n').filter((l) => l.includes('cmd=bzpopmin'));
          log(`master ${node.options.port}: ${blocked.length} connections in BZPOPMIN`);
          for (const l of blocked) log(`  ${l.trim()}`);
        }
      }
      for (const [i, restarts] of fetchRestarts.entries())
        log(`worker ${i + 1}: ${restarts.length} fetch loops restarted ${restarts.join(' ')}`);
      const f = keys.flow();
      const [counts, held, waiting, turns, line] = await Promise.all([
        reader.hgetall(f.counts),
        reader.hlen(f.held),
        reader.hlen(f.waiting),
        reader.zrange(f.turns, 0, -1, 'WITHSCORES'),
        reader.zcard(keys.flowLine('acme')),
      ]);
      log(
        `flow state: counts ${JSON.stringify(counts)} held ${held} waiting ${waiting} turns ${JSON.stringify(turns)} line ${line}`,
      );
    }
    const byStatus: Record<string, number> = {};
    for (const s of statuses) byStatus[s] = (byStatus[s] ?? 0) + 1;
    const perRecipient = new Map<string, number>();
    for (const r of sandbox.records('emails')) {
      for (const to of (r.resource.to as string[] | undefined) ?? [])
        perRecipient.set(to, (perRecipient.get(to) ?? 0) + 1);
    }
    const perTicket = new Map<string, number>();
    for (const r of sandbox.records('tickets')) {
      const source = /Follow-up on (\S+):/.exec(String(r.resource.subject ?? ''))?.[1] ?? String(r.id);
      perTicket.set(source, (perTicket.get(source) ?? 0) + 1);
    }
    // Each duplicate named with its records (key, subject, time): what the closing note cites.
    for (const [source, n] of perTicket) {
      if (n < 2) continue;
      const copies = sandbox
        .records('tickets')
        .filter((r) => String(r.resource.subject ?? '').includes(`on ${source}:`))
        .map((r) => `${r.idempotencyKey} "${String(r.resource.subject)}" at ${r.createdAtMs}`);
      log(`duplicate ticket for ${source}: ${copies.join(' | ')}`);
    }
    const result: CampaignResult = {
      minReplicas: o.minReplicas,
      lag: o.lag,
      kills: o.kills,
      submitted,
      acknowledged: acked.length,
      answered503: tally.s503,
      answered500: tally.s500,
      apiErrors: apiProcess.lines.filter((l) => l.includes('"api_error"')).slice(-5),
      vanished: byStatus.vanished ?? 0,
      notTerminal: statuses.filter((s) => !TERMINAL.has(s) && s !== 'vanished').length,
      statuses: byStatus,
      duplicateEmails: [...perRecipient.values()].filter((n) => n > 1).reduce((a, n) => a + n - 1, 0),
      duplicateTickets: [...perTicket.values()].filter((n) => n > 1).reduce((a, n) => a + n - 1, 0),
      duplicateKeys: sandbox.counts().duplicates,
      emails: sandbox.records('emails').length,
      recoveryMs,
    };
    reader.disconnect();
    // FAILOVER_DEBUG: the last start, shutdown and error lines (a 500's cause) of every process.
    if (process.env.FAILOVER_DEBUG) for (const w of [...workers, ...procs]) log(w.lines.slice(-15).join('\n'));
    return result;
  }
}

const argv = process.argv.slice(2);
if (import.meta.url === `file://${process.argv[1]}`) {
  const arg = (name: string, def: string) => argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? def;
  const result = await runFailoverCampaign({
    store: arg('store', 'sentinel') === 'cluster' ? 'cluster' : 'sentinel',
    minReplicas: Number(arg('replicas', '1')),
    lag: argv.includes('--lag'),
    kills: Number(arg('kills', '3')),
    lagMs: Number(arg('lag-ms', '1500')),
    rate: Number(arg('rate', '20')),
    ...(arg('flow', '') === '' ? {} : { flowControl: arg('flow', '') !== 'false' }),
    minAcknowledged: Number(arg('min-acked', '0')),
    log: (l) => console.log(l),
  });
  console.log(JSON.stringify(result, null, 2));
  process.exit(0);
}
