/** `npm run api`: the HTTP API on PORT (/v1/runs, /healthz, /readyz, /metrics, operator routes). */
import { loadConfig } from '../config.js';
import { createContext } from '../app/context.js';
import { createFullApi } from './fullApi.js';

const cfg = loadConfig();
const ctx = await createContext(cfg, 'api');
let ready = true;
const app = createFullApi(ctx, () => ready);
const server = app.listen(cfg.PORT, cfg.HOST, () => ctx.log.info({ code: 'api_listening', url: `http://${cfg.HOST}:${cfg.PORT}` }, 'api listening'));

async function shutdown(): Promise<void> {
  ready = false;
  server.close();
  await ctx.close();
  process.exit(0);
}
process.on('SIGTERM', () => void shutdown());
process.on('SIGINT', () => void shutdown());
