/** `npm run api`: the HTTP API on PORT (/v1/runs, /healthz, /readyz, /metrics, operator routes). */
import { createServer } from 'node:http';
import { loadConfig } from '../config.js';
import { boot, listen } from '../app/boot.js';
import { createContext } from '../app/context.js';
import { createFullApi } from './fullApi.js';

let ready = true;
const { ctx, server } = await boot('api', async () => {
  const cfg = loadConfig();
  const ctx = await createContext(cfg, 'api');
  const server = createServer(createFullApi(ctx, () => ready));
  const port = await listen(server, cfg.PORT, cfg.HOST, 'PORT');
  ctx.log.info({ code: 'api_listening', url: `http://${cfg.HOST}:${port}` }, 'api listening');
  return { cfg, ctx, server };
});

async function shutdown(): Promise<void> {
  ready = false;
  server.close();
  await ctx.close();
  process.exit(0);
}
process.on('SIGTERM', () => void shutdown());
process.on('SIGINT', () => void shutdown());
