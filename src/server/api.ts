/** `npm run api`: the HTTP API on PORT (/v1/runs, /healthz, /readyz, /metrics, operator routes). */
import { createServer } from 'node:http';
import { loadConfig } from '../config/config.js';
import { boot, listen } from './boot.js';
import { createContext, warnIfDevelopment } from './buildContext.js';
import { startOpsServer } from '../http/opsServer.js';
import { leaveOnSignals } from './shutdown.js';
import { createFullApi } from '../http/fullApi.js';

let ready = true;
const { ctx, server, metricsServer } = await boot('api', async () => {
  const cfg = loadConfig(process.env, { role: 'api' });
  const ctx = await createContext(cfg, 'api');
  const server = createServer(createFullApi(ctx, () => ready));
  const port = await listen(server, cfg.PORT, cfg.HOST, 'PORT');
  ctx.log.info({ code: 'api_listening', url: `http://${cfg.HOST}:${port}` }, 'api listening');
  // /metrics on its own port (not on PORT) when API_METRICS_PORT is set.
  const metricsServer =
    cfg.API_METRICS_PORT > 0
      ? (
          await startOpsServer({
            port: cfg.API_METRICS_PORT,
            host: cfg.HOST,
            registry: ctx.metrics.registry,
            isReady: () => ready,
            metricsAccess: cfg,
            metricsOnly: true,
            portSetting: 'API_METRICS_PORT',
          })
        ).server
      : undefined;
  if (cfg.DEV_AUTH === 'generate') {
    // Development only (refused in production): the generated credentials go to the terminal, never to the log.
    console.log(
      `DEV_AUTH=generate: producer token ${cfg.PRODUCER_TOKEN}, operator token ${cfg.OPERATOR_TOKEN}, Bull Board ${cfg.BULL_BOARD_USER} / ${cfg.BULL_BOARD_PASSWORD} at http://${cfg.HOST}:${port}/admin/queues`,
    );
  }
  warnIfDevelopment(cfg, ctx.log);
  return { cfg, ctx, server, metricsServer };
});

leaveOnSignals({
  log: ctx.log,
  role: 'api',
  graceMs: ctx.cfg.SHUTDOWN_GRACE_MS,
  stop: async () => {
    ready = false;
    server.close();
    metricsServer?.close();
  },
  close: () => ctx.close(),
});
