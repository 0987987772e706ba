/**
 * `npm start`: the all-in-one demo. Uses REDIS_URL when set, else spawns an
 * embedded redis-server (AOF on); starts the sandbox service, the API, the
 * reconciler and two worker processes; enqueues a few sample tickets; prints
 * their progress as it happens; serves until Ctrl-C.
 *
 * The model: `--model=scripted` (default) plays the support agent's script in
 * process; `--model=openai-local` / `--model=anthropic-local` (or DEMO_MODEL=...)
 * start the test kit's local OpenAI-compatible / Anthropic Messages server
 * playing the same script over HTTP, and the workers call it through the real
 * AI SDK provider (openai-compatible / anthropic), as against vLLM or the vendor.
 *
 * Stopping is bounded whatever dies first: Ctrl-C (SIGINT to the whole process group) stops the workers, then the
 * API and Redis, within STOP_DEADLINE_MS, after which everything left is killed; a second Ctrl-C kills at once. The
 * embedded redis-server has its own process group, so Ctrl-C does not stop it before its clients; if it dies anyway,
 * nothing waits on it. Its temp dir goes in every case, and a start removes those of demos killed by SIGKILL.
 *
 * The archive: ARCHIVE_URL when set, else a PostgreSQL started from PATH in a temp dir (testkit/embeddedPostgres.ts),
 * given to every process of the demo (each ends runs), and archived by the demo's reconciler. Without PostgreSQL's
 * server binaries the demo says so in one line and runs without an archive.
 */
import { rmSync } from 'node:fs';
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import { loadConfig } from '../src/config/config.js';
import { boot, listen, PortInUseError } from '../src/server/boot.js';
import { createContext } from '../src/server/buildContext.js';
import { spawnModule } from '../testkit/spawnModule.js';
import { createLogger } from '../src/metrics/log.js';
import { ledgerFor } from '../src/ledger/ledger.js';
import { Reconciler } from '../src/ledger/reconciler.js';
import { createFullApi } from '../src/http/fullApi.js';
import { freePort, removeStaleRedisDirs, startEmbeddedRedis, type EmbeddedRedis } from '../testkit/embeddedRedis.js';
import { startSandbox } from '../sandbox/server.js';
import { startOpenAIServer } from '../testkit/modelServers/openai.js';
import { startAnthropicServer } from '../testkit/modelServers/anthropic.js';
import type { ModelServer } from '../testkit/modelServers/queue.js';
import { scriptResponder } from '../testkit/modelServers/scriptPlayer.js';
import { scriptSchema, type Script } from '../src/models/scriptedTurns.js';
import { postgresBinDir, startEmbeddedPostgres, type EmbeddedPostgres } from '../testkit/embeddedPostgres.js';
import { archiverFor } from '../src/server/archiving.js';

const DEMO_MODELS = ['scripted', 'openai-local', 'anthropic-local'] as const;
type DemoModel = (typeof DEMO_MODELS)[number];
const demoModelArg =
  process.argv.find((a) => a.startsWith('--model='))?.slice('--model='.length) ?? process.env.DEMO_MODEL ?? 'scripted';

/** The deployment settings that point the workers at a local model server (a real provider over HTTP). */
function localModelEnv(model: DemoModel, server: ModelServer | undefined): Record<string, string> {
  if (model === 'openai-local')
    return {
      MODEL_PROVIDER: 'openai-compatible',
      OPENAI_COMPATIBLE_BASE_URL: `${server!.url}/v1`,
      OPENAI_COMPATIBLE_MODEL: 'demo-local-llama',
    };
  if (model === 'anthropic-local')
    return {
      MODEL_PROVIDER: 'anthropic',
      ANTHROPIC_BASE_URL: `${server!.url}/v1`,
      ANTHROPIC_API_KEY: 'demo-local-key',
      ANTHROPIC_MODEL: 'demo-local-claude',
    };
  return {};
}

// Ports: a port set in the environment is used as given (taken: one line naming it, exit 1); an
// unset one is the default when free, else any free port, so two demos run side by side.
let embedded: EmbeddedRedis | undefined;
let archiveDb: EmbeddedPostgres | undefined;
let modelServer: ModelServer | undefined;
// A signal while still starting (handlers below replace this one): Redis has its own process group, so it and its
// temp dir go with the demo here; sandbox and model server are in this process.
const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
function leaveWhileStarting(): void {
  archiveDb?.process?.kill('SIGKILL');
  if (archiveDb?.dir) rmSync(archiveDb.dir, { recursive: true, force: true });
  embedded?.process?.kill('SIGKILL');
  if (embedded?.dir) rmSync(embedded.dir, { recursive: true, force: true });
  process.exit(1);
}
for (const signal of SIGNALS) process.on(signal, leaveWhileStarting);
const { env, redisUrl, cfg, ctx, sandbox, server, apiPort, workerPorts, demoModel } = await boot(
  'demo',
  async () => {
    if (!(DEMO_MODELS as readonly string[]).includes(demoModelArg))
      throw new Error(`--model (DEMO_MODEL) must be one of ${DEMO_MODELS.join(', ')}, not '${demoModelArg}'`);
    const demoModel = demoModelArg as DemoModel;
    const base = loadConfig();
    let redisUrl = base.REDIS_URL;
    if (!redisUrl && base.REDIS_CLUSTER_NODES.length === 0) {
      for (const stale of await removeStaleRedisDirs())
        console.log(`demo: removed ${stale.dir}, the Redis dir of a demo that is gone (pid ${stale.owner})`);
      embedded = await startEmbeddedRedis({ detached: true });
      redisUrl = embedded.url;
    }
    const archiveUrl = base.ARCHIVE_URL ?? (await startArchiveDb());
    const sandbox = await startSandbox({ port: 0 });
    if (demoModel === 'openai-local') modelServer = await startOpenAIServer();
    if (demoModel === 'anthropic-local') modelServer = await startAnthropicServer();
    const env = {
      ...process.env,
      ...(redisUrl ? { REDIS_URL: redisUrl } : {}),
      SANDBOX_URL: sandbox.url,
      ...(archiveUrl ? { ARCHIVE_URL: archiveUrl } : {}),
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
      ...localModelEnv(demoModel, modelServer),
    };
    // The API's credentials: random ones for this demo (DEV_AUTH=generate), printed below; the workers need none.
    const cfg = loadConfig({ ...env, DEV_AUTH: process.env.DEV_AUTH ?? 'generate' });
    const ctx = await createContext(cfg, 'demo', { log: createLogger('demo', cfg.LOG_LEVEL) });
    const server = createServer(createFullApi(ctx, () => true));
    const apiPort = await listen(server, cfg.PORT, cfg.HOST, 'PORT').catch(async (err: unknown) => {
      if (err instanceof PortInUseError && !process.env.PORT) return listen(server, 0, cfg.HOST, 'PORT');
      // Its Redis and archive clients close before the servers they talk to stop (no connection-lost lines).
      await ctx.close();
      throw err;
    });
    const workerPorts = process.env.WORKER_METRICS_PORT
      ? [cfg.WORKER_METRICS_PORT, cfg.WORKER_METRICS_PORT + 1]
      : await Promise.all([0, 1].map(() => freePort()));
    return { env, redisUrl, cfg, ctx, sandbox, server: server, apiPort, workerPorts, demoModel };
  },
  async () => {
    await modelServer?.close();
    await embedded?.stop();
    await archiveDb?.stop();
  },
);

/** A PostgreSQL from PATH for the archive, or undefined (said in one line) when its binaries are missing. */
async function startArchiveDb(): Promise<string | undefined> {
  if (!postgresBinDir()) {
    console.log('demo: no PostgreSQL server on PATH (initdb, postgres): running without the archive (docs/archive.md)');
    return undefined;
  }
  archiveDb = await startEmbeddedPostgres();
  return archiveDb.url;
}
const apiUrl = `http://${cfg.HOST}:${apiPort}`;
const reconciler = new Reconciler(ctx, 'reconciler:demo');
reconciler.start();
const archiver = archiverFor(ctx, 'archiver:demo');
archiver?.start();

let stopping = false;
// Each worker holds an IPC channel to the demo and leaves when it closes: a demo killed by SIGKILL leaves no worker.
const workers: ChildProcess[] = workerPorts.map((port) =>
  spawnModule('src/server/worker', { ...env, WORKER_METRICS_PORT: String(port) }, [
    'inherit',
    'inherit',
    'inherit',
    'ipc',
  ]),
);
for (const w of workers) w.channel?.unref();
if (embedded) reapWithDemo(embedded);
if (archiveDb) reapWithDemo(archiveDb);
watchParent();
// A worker that cannot start (its port taken, say) has printed why: the demo stops with it.
// Ctrl-C signals the whole group: a worker it killed can be reported here before this process's own SIGINT is
// handled (the two signals may land on different threads), so a worker gone by one of those signals waits a moment.
for (const w of workers) {
  w.once('exit', (code, signal) => {
    if (stopping || code === 0) return;
    const stopForWorker = () => {
      if (stopping) return;
      console.error(`demo: a worker process exited (${code ?? signal}): stopping`);
      void stop(1);
    };
    if (signal && (SIGNALS as readonly string[]).includes(signal)) setTimeout(stopForWorker, SIGNAL_ECHO_MS);
    else stopForWorker();
  });
}

/**
 * Redis runs in its own process group (Ctrl-C must not stop it before its clients), so nothing would stop it if the
 * demo were SIGKILLed: a small reaper holding an IPC channel to the demo kills it and removes its dir when the channel
 * closes, however the demo ended. After a normal stop it finds Redis gone already. The archive's PostgreSQL has one too:
 * it dies with the demo's process group, its temp dir would not.
 */
function reapWithDemo(server: { process?: ChildProcess | undefined; dir: string }): void {
  const pid = server.process?.pid;
  if (pid === undefined) return;
  const script =
    `process.on('disconnect', () => { try { process.kill(${pid}, 'SIGKILL'); } catch {} ` +
    `require('node:fs').rmSync(${JSON.stringify(server.dir)}, { recursive: true, force: true }); process.exit(0); });`;
  const reaper = spawn(process.execPath, ['-e', script], {
    stdio: ['ignore', 'ignore', 'ignore', 'ipc'],
    detached: true,
  });
  reaper.unref();
  reaper.channel?.unref();
}

/** `npm start` killed (SIGKILL of npm or its shell): this process is orphaned, its parent id changes: it stops. */
function watchParent(): void {
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid === parent) return;
    console.error('demo: the process that started the demo is gone: stopping');
    void stop(1);
  }, 500).unref();
}

/** Past this, a stop that has not finished kills what is left (a Redis that froze, a close that waits for ever). */
const STOP_DEADLINE_MS = 5000;
/** Ctrl-C reaches the demo from the terminal and again through npm and tsx: a second signal this soon is that echo. */
const SIGNAL_ECHO_MS = 1000;
let stopStartedAt = 0;
// Assigned once the samples are sent, below; a stop before that has no poll to clear.
// eslint-disable-next-line prefer-const
let poll: NodeJS.Timeout | undefined;

/** Kills every child left, removes Redis's temp dir, exits: nothing here waits on anything. */
function forceExit(why: string): never {
  console.error(`demo: ${why}: killing what is left`);
  for (const w of workers) w.kill('SIGKILL');
  embedded?.process?.kill('SIGKILL');
  if (embedded?.dir) rmSync(embedded.dir, { recursive: true, force: true });
  archiveDb?.process?.kill('SIGKILL');
  if (archiveDb?.dir) rmSync(archiveDb.dir, { recursive: true, force: true });
  process.exit(1);
}

/** Whether the embedded redis-server has exited (an external Redis is never known to be gone). */
function redisGone(): boolean {
  const p = embedded?.process;
  return p !== undefined && (p.exitCode !== null || p.signalCode !== null);
}

/** Redis is gone: its clients stop reconnecting (pending commands fail at once) and workers cannot hand back. */
function abandonRedis(): void {
  ctx.redis.disconnect();
  for (const w of workers) w.kill('SIGKILL');
}

async function stop(exitCode = 0): Promise<void> {
  if (stopping) return;
  stopping = true;
  stopStartedAt = Date.now();
  setTimeout(() => forceExit(`the stop took longer than ${STOP_DEADLINE_MS} ms`), STOP_DEADLINE_MS).unref();
  clearInterval(poll);
  if (redisGone()) abandonRedis();
  for (const w of workers) w.kill('SIGTERM');
  // A worker killed by a signal has a signalCode and no exitCode: it is gone too.
  const exited = (w: ChildProcess) => w.exitCode !== null || w.signalCode !== null;
  await Promise.all(workers.map((w) => new Promise((r) => (exited(w) ? r(null) : w.once('exit', r)))));
  await Promise.all([reconciler.stop(), archiver?.stop()]);
  server.close();
  server.closeAllConnections();
  await ctx.close();
  await sandbox.close();
  await modelServer?.close();
  await embedded?.stop();
  await archiveDb?.stop();
  process.exit(exitCode);
}

function onSignal(signal: NodeJS.Signals): void {
  if (!stopping) return void stop();
  if (Date.now() - stopStartedAt < SIGNAL_ECHO_MS) return;
  forceExit(`second ${signal}`);
}
// Redis that dies under a running demo (killed, crashed) ends the demo: nothing can run without it.
embedded?.process?.once('exit', (code, signal) => {
  if (stopping) return abandonRedis();
  console.error(`demo: the embedded redis-server exited (${signal ?? code}): stopping`);
  void stop(1);
});
for (const signal of SIGNALS) {
  process.off(signal, leaveWhileStarting);
  process.on(signal, onSignal);
}
// Whatever way this process exits (an exception included; SIGKILL excepted), Redis's temp dir goes with it.
process.once('exit', () => {
  if (embedded?.dir) rmSync(embedded.dir, { recursive: true, force: true });
  if (archiveDb?.dir) rmSync(archiveDb.dir, { recursive: true, force: true });
});

console.log(`
durable agent fleet demo
  Redis        ${redisUrl ?? cfg.REDIS_CLUSTER_NODES.join(',')}${embedded ? ` (embedded, AOF on, in ${embedded.dir})` : ''}
  console      ${apiUrl}/console   (log in with the operator token below)
  API          ${apiUrl}/v1/runs   (health ${apiUrl}/healthz, metrics ${apiUrl}/metrics)
  Bull Board   ${apiUrl}/admin/queues   (user ${cfg.BULL_BOARD_USER ?? '-'}, password ${cfg.BULL_BOARD_PASSWORD ?? '-'}; run pages ${apiUrl}/runs/<runId>)
  tokens       producer ${cfg.PRODUCER_TOKEN ?? '-'}   operator ${cfg.OPERATOR_TOKEN ?? '-'}   (generated for this demo: DEV_AUTH=generate)
               e.g. curl -H 'authorization: Bearer ${cfg.OPERATOR_TOKEN ?? ''}' ${apiUrl}/v1/approvals
               npm run ctl -- approvals --url ${apiUrl} --token ${cfg.OPERATOR_TOKEN ?? ''}
  archive      ${cfg.ARCHIVE_URL ? `${cfg.ARCHIVE_URL.replace(/\/\/[^@/]*@/, '//')}${archiveDb ? ` (embedded PostgreSQL in ${archiveDb.dir})` : ''}: ended runs copied there, then Redis lets them go` : 'none (no ARCHIVE_URL, no PostgreSQL on PATH): runs leave Redis after RUN_RETENTION_MS'}
  sandbox      ${sandbox.url}       (counts ${sandbox.url}/_sandbox/counts)
  workers      2 processes, metrics on :${workerPorts[0]} and :${workerPorts[1]}
  model        ${modelServer ? `${cfg.MODEL_PROVIDER} ${demoModel === 'openai-local' ? cfg.OPENAI_COMPATIBLE_MODEL : cfg.ANTHROPIC_MODEL} at ${modelServer.url} (local ${demoModel === 'openai-local' ? 'OpenAI-compatible' : 'Anthropic Messages'} server playing the demo script; the real AI SDK provider over HTTP)` : 'scripted (in process; npm start -- --model=openai-local for a local model server over HTTP)'}
Ctrl-C stops everything.
`);

const tickets = [
  {
    id: 'DEMO-1',
    subject: 'My order arrived broken',
    body: 'The mug was shattered.',
    customer: { email: 'ada@example.com', name: 'Ada' },
  },
  {
    id: 'DEMO-2',
    subject: 'Where is my refund?',
    body: 'I returned the lamp two weeks ago.',
    customer: { email: 'grace@example.com', name: 'Grace' },
  },
  {
    id: 'DEMO-3',
    subject: 'Cannot log in',
    body: 'Password reset email never arrives.',
    customer: { email: 'linus@example.com', name: 'Linus' },
  },
];
// A local model server plays the support agent's demo script, each run's turns matched by its prompt.
if (modelServer) {
  const support = ctx.agents.get('support');
  const scripts = new Map<string, Script>();
  for (const t of tickets)
    if (support?.demoScript) scripts.set(support.prompt(t), scriptSchema.parse(support.demoScript(t)));
  modelServer.respond = scriptResponder(scripts);
}
// One ticket's email send loses its response after committing: watch it get reconciled, not resent.
sandbox.setFaults([{ kind: 'lost_response_after_commit', resource: 'emails', count: 1 }]);

const runIds: string[] = [];
for (const ticket of tickets) {
  // A Ctrl-C while the samples are sent: the stop closes the API under this loop.
  if (stopping) break;
  const res = await fetch(`${apiUrl}/v1/runs`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(cfg.PRODUCER_TOKEN ? { authorization: `Bearer ${cfg.PRODUCER_TOKEN}` } : {}),
    },
    body: JSON.stringify({ tenant: 'demo', ticket }),
  }).catch((err: unknown) => {
    if (stopping) return undefined;
    throw err;
  });
  if (!res) break;
  const body = (await res.json()) as { runId: string };
  runIds.push(body.runId);
  console.log(`enqueued ${ticket.id} -> run ${body.runId} (${res.status})  ${apiUrl}/runs/${body.runId}`);
}

const ledger = ledgerFor(ctx);
const last = new Map<string, string>();
let reported = false;
let archivedReported = false;
poll = setInterval(async () => {
  if (stopping) return;
  try {
    await report();
  } catch (err) {
    // Redis going away while the demo stops: the stop says what happens next.
    if (!stopping) console.error(`demo: progress read failed: ${String(err)}`);
  }
}, 300);

async function report(): Promise<void> {
  for (const runId of runIds) {
    const state = await ctx.store.readState(runId);
    if (!state) continue;
    const effects = await ledger.listForRun(runId);
    const line = `${state.status} step=${state.cursor} steps=${state.used.steps} tokens=${state.used.tokens} effects=[${effects.map((e) => `${e.tool}:${e.state}`).join(' ')}]${state.reason ? ` reason=${state.reason}` : ''}`;
    if (last.get(runId) !== line) {
      last.set(runId, line);
      console.log(`${new Date().toISOString().slice(11, 23)} ${runId} ${line}`);
    }
  }
  if (reported && !archivedReported && ctx.archive) await reportArchived(ctx.archive.pool);
  if (
    [...last.values()].length === runIds.length &&
    [...last.values()].every((l) => /^(completed|failed|budget_exceeded|needs_human|cancelled)/.test(l)) &&
    !reported
  ) {
    reported = true;
    const c = sandbox.counts();
    for (const runId of runIds) {
      for (const a of await ledger.listForRun(runId)) {
        if (!a.history.some((h) => h.to === 'outcome_unknown')) continue;
        const path = [a.history[0]?.from ?? 'new', ...a.history.map((h) => h.to)]
          .filter((x) => x !== 'new')
          .join(' -> ');
        console.log(`reconciled, not resent: ${runId} ${a.tool} ${path} (${a.history[a.history.length - 1]?.why})`);
      }
    }
    console.log(
      `all runs settled. sandbox effects: tickets=${c.byResource.tickets?.records} emails=${c.byResource.emails?.records} duplicates=${c.duplicates}.${modelServer ? ` model server: ${modelServer.requests.length} requests, models ${[...new Set(modelServer.requests.map((r) => String(r.body.model)))].join(',')}.` : ''} Still serving; Ctrl-C to stop.`,
    );
  }
}

/** Once every sample run has its archive row: one line saying so. */
async function reportArchived(pool: NonNullable<typeof ctx.archive>['pool']): Promise<void> {
  const res = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM archived_runs WHERE run_id = ANY($1)', [
    runIds,
  ]);
  if (res.rows[0]!.n < runIds.length) return;
  archivedReported = true;
  console.log(
    `archived: ${runIds.length} runs in PostgreSQL (archived_runs), each once; GET /v1/runs/:id reads them from there once Redis lets them go.`,
  );
}
