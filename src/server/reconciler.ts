/** `npm run reconciler`: the sweeping reconciler process (ops port RECONCILER_METRICS_PORT). */
import { loadConfig } from '../config/config.js';
import { boot } from './boot.js';
import { createContext } from './buildContext.js';
import { startOpsServer } from '../http/opsServer.js';
import { storeConnected, storeEnded } from '../store/connect.js';
import { Reconciler } from '../ledger/reconciler.js';

const { ctx, reconciler, ops } = await boot('reconciler', async () => {
  const cfg = loadConfig();
  const ctx = await createContext(cfg, 'reconciler');
  const reconciler = new Reconciler(ctx);
  const ops = await startOpsServer({
    port: cfg.RECONCILER_METRICS_PORT,
    host: cfg.HOST,
    registry: ctx.metrics.registry,
    isReady: () => reconciler.ready && storeConnected(ctx.redis),
    isAlive: () => !storeEnded(ctx.redis),
    metricsToken: cfg.METRICS_TOKEN,
    portSetting: 'RECONCILER_METRICS_PORT',
  });
  return { ctx, reconciler, ops };
});
reconciler.start();
ctx.log.info({ code: 'reconciler_started', metricsPort: ops.port }, 'reconciler started');

async function shutdown(): Promise<void> {
  await reconciler.stop();
  ops.server.close();
  await ctx.close();
  process.exit(0);
}
process.on('SIGTERM', () => void shutdown());
process.on('SIGINT', () => void shutdown());
