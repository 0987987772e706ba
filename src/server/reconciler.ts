/** `npm run reconciler`: the sweeping reconciler process (ops port RECONCILER_METRICS_PORT). */
import { loadConfig } from '../config/config.js';
import { boot } from './boot.js';
import { createContext, warnIfDevelopment } from './buildContext.js';
import { startOpsServer } from '../http/opsServer.js';
import { storeConnected, storeEnded } from '../store/connect.js';
import { Reconciler } from '../ledger/reconciler.js';
import { archiverFor } from './archiving.js';
import { leaveOnSignals } from './shutdown.js';

const { ctx, reconciler, archiver, ops } = await boot('reconciler', async () => {
  const cfg = loadConfig(process.env, { role: 'reconciler' });
  const ctx = await createContext(cfg, 'reconciler');
  const reconciler = new Reconciler(ctx);
  const archiver = archiverFor(ctx);
  const ops = await startOpsServer({
    port: cfg.RECONCILER_METRICS_PORT,
    host: cfg.HOST,
    registry: ctx.metrics.registry,
    isReady: () => reconciler.ready && (archiver?.ready ?? true) && storeConnected(ctx.redis),
    isAlive: () => !storeEnded(ctx.redis),
    metricsAccess: cfg,
    portSetting: 'RECONCILER_METRICS_PORT',
  });
  return { ctx, reconciler, archiver, ops };
});
reconciler.start();
archiver?.start();
ctx.log.info({ code: 'reconciler_started', metricsPort: ops.port }, 'reconciler started');
warnIfDevelopment(ctx.cfg, ctx.log);

leaveOnSignals({
  log: ctx.log,
  role: 'reconciler',
  graceMs: ctx.cfg.SHUTDOWN_GRACE_MS,
  stop: async () => {
    await Promise.all([reconciler.stop(), archiver?.stop()]);
    ops.server.close();
  },
  close: () => ctx.close(),
});
