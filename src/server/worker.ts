/**
 * `npm run worker`: one worker process. First SIGTERM/SIGINT: graceful
 * handoff (see FleetWorker); a second one, or the grace period plus a margin,
 * exits anyway; so does a store unreachable for half the grace (exit 1, within
 * the grace). Exit code 0 after a graceful stop.
 */
import { loadConfig } from '../config/config.js';
import { boot } from './boot.js';
import { createContext, warnIfDevelopment } from './buildContext.js';
import { startOpsServer } from '../http/opsServer.js';
import { storeConnected, storeEnded, storeUnreachableFor } from '../store/connect.js';
import { createEffectRunner } from '../ledger/runner.js';
import { approvalPolicy } from '../ledger/approvals.js';
import { FleetWorker } from '../worker/fleetWorker.js';
import { Schedules, startScheduleWorker } from '../producer/schedules.js';
import { settledWithin } from '../core/timeout.js';
import { warmUpModelCalls } from '../models/warmUp.js';
import { reportToolSources, toolSourcesHealth, toolSourcesOf } from './toolSources.js';
import { leaveWithParent } from './parentWatch.js';
import { CONNECTIONS_CLOSE_TIMEOUT_MS, onShutdownSignals } from './shutdown.js';

/** How often a stopping worker asks whether its store is gone. */
const STORE_CHECK_MS = 100;

// A signal while the process is still starting: it holds no job yet, so it just leaves (exit 0).
let started = false;
const leaveWhileStarting = () => {
  if (!started) process.exit(0);
};
process.on('SIGTERM', leaveWhileStarting);
process.on('SIGINT', leaveWhileStarting);
// Started by a parent that holds an IPC channel (the demo): its death is a SIGTERM, the graceful handoff.
leaveWithParent(() => process.kill(process.pid, 'SIGTERM'));

const { cfg, ctx, fleet, ops } = await boot('worker', async () => {
  const cfg = loadConfig(process.env, { role: 'worker' });
  const ctx = await createContext(cfg, 'worker');
  const fleet = new FleetWorker(ctx, {
    effects: createEffectRunner(ctx, { approvals: approvalPolicy(ctx.cfg.APPROVAL_RULES) }),
  });
  // The agents' tool connections (MCP servers): in the metrics, the log and /healthz.
  const sources = toolSourcesOf(ctx.agents);
  reportToolSources(sources, ctx.metrics.registry, ctx.log);
  const ops = await startOpsServer({
    port: cfg.WORKER_METRICS_PORT,
    host: cfg.HOST,
    registry: ctx.metrics.registry,
    isReady: () => fleet.ready && storeConnected(ctx.redis),
    isAlive: () => !storeEnded(ctx.redis),
    health: () => {
      const h = toolSourcesHealth(sources);
      return h.down.length > 0 ? { alive: h.alive, toolSourcesDown: h.down } : { alive: true };
    },
    metricsAccess: cfg,
    portSetting: 'WORKER_METRICS_PORT',
  });
  return { cfg, ctx, fleet, ops };
});
// From boot on: a store that went away before the signal has been gone that long when it comes.
const storeDownFor = storeUnreachableFor(ctx.redis);
await fleet.nameOwners();
// Before the first job: a fresh worker is what takes over a killed one's step, and its first model call was slow.
const warmed = await warmUpModelCalls(ctx.providers, ctx.log);
// The BullMQ worker ids (`<uuid>@<client id>`) prefix the lock tokens of the jobs this process holds (operators and the
// chaos campaign map a lock to its process). Logged before any job is taken: a step may crash the process at once.
// name@version, the version alone when it already says the name (defineAgent's `version: 'order-status@1'`).
const served = ctx.agents.all.map((a) => (a.version.startsWith(`${a.name}@`) ? a.version : `${a.name}@${a.version}`));
ctx.log.info(
  {
    code: 'worker_started',
    pid: process.pid,
    metricsPort: ops.port,
    shards: ctx.keys.allShards().length,
    bullWorkerIds: fleet.workers.map((w) => w.id),
    warmed,
    // Which agents (name@version) this process steps: a worker started on the wrong module says so at once.
    agents: served,
  },
  `worker started, serving ${served.join(', ')}`,
);
warnIfDevelopment(cfg, ctx.log);
fleet.run();
// Schedule ticks become runs in worker processes (any number of them: one run per tick).
const schedules = new Schedules(ctx);
const ticker = startScheduleWorker(ctx, schedules);
started = true;

/**
 * A store unreachable for half the grace is gone, not restarting or failing over (seconds): the hand-back writes to it
 * and would wait out the grace and its margin for nothing. The worker leaves within the grace instead; what it holds
 * goes back to the queue when its locks lapse (a killed worker's path), and a dispatch in flight is reconciled.
 */
function leaveIfStoreGone(): void {
  const downMs = storeDownFor();
  if (storeConnected(ctx.redis) || downMs < cfg.SHUTDOWN_GRACE_MS / 2) return;
  ctx.log.error(
    { code: 'store_gone', downMs, held: [...fleet.held] },
    `Redis unreachable for ${downMs} ms: nothing can be handed back (held jobs return when their locks lapse): exiting`,
  );
  process.exit(1);
}

async function shutdown(signal: NodeJS.Signals): Promise<void> {
  ctx.log.info({ code: 'shutdown_started', signal, graceMs: cfg.SHUTDOWN_GRACE_MS }, 'handing jobs back');
  let stage = 'handing_back';
  const hardExit = setTimeout(() => {
    ctx.log.error(
      { code: 'forced_exit', stage, held: [...fleet.held] },
      'shutdown did not finish after the grace period: exiting',
    );
    process.exit(1);
  }, cfg.SHUTDOWN_GRACE_MS + 3000);
  hardExit.unref();
  leaveIfStoreGone();
  const storeWatch = setInterval(leaveIfStoreGone, STORE_CHECK_MS);
  await Promise.all([fleet.stop(), ticker.close()]);
  // Every job is handed back: closing the connections (bounded below) ends the client, which is no store gone.
  clearInterval(storeWatch);
  stage = 'closing_connections';
  ops.server.close();
  // A connection stuck reconnecting (Redis away) must not keep a stopped worker alive: wait a bounded time, say so.
  if (!(await settledWithin(ctx.close(), CONNECTIONS_CLOSE_TIMEOUT_MS)))
    ctx.log.warn(
      { code: 'close_timeout', worker: 'connections', timeoutMs: CONNECTIONS_CLOSE_TIMEOUT_MS },
      'Redis connections did not close; every job was handed back, leaving anyway',
    );
  ctx.log.info({ code: 'shutdown_done' }, 'worker stopped');
  process.exit(0);
}
process.off('SIGTERM', leaveWhileStarting);
process.off('SIGINT', leaveWhileStarting);
onShutdownSignals(ctx.log, shutdown);
