/**
 * The small HTTP port of worker and reconciler processes (and the API's API_METRICS_PORT): /healthz, /readyz, /metrics.
 */
import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';
import type { Config } from '../config/config.js';
import { tokenMatches } from './auth.js';
import { listen } from './listen.js';

/** What decides who reads /metrics, on every process that serves it. */
export type MetricsAccess = Pick<Config, 'METRICS_TOKEN' | 'APP_MODE'>;

/**
 * Why a /metrics request may not read, or undefined when it may. Metrics name tenants and volumes, and every process
 * binds HOST (0.0.0.0 in the image): with METRICS_TOKEN set, only `Authorization: Bearer <METRICS_TOKEN>` reads;
 * in production without it nobody does (503 naming the setting), on the API's PORT, its API_METRICS_PORT, and the
 * worker's and reconciler's ports alike. Development without a token serves them to anyone.
 */
export function metricsRefusal(
  access: MetricsAccess,
  authorization: string | undefined,
): { status: 401 | 503; body: { error: string; message: string } } | undefined {
  const token = access.METRICS_TOKEN;
  if (token === undefined) {
    if (access.APP_MODE !== 'production') return undefined;
    return {
      status: 503,
      body: {
        error: 'metrics_not_exposed',
        message: 'in production /metrics needs METRICS_TOKEN: set it, and give it to Prometheus as a bearer token',
      },
    };
  }
  if (tokenMatches(authorization?.startsWith('Bearer ') ? authorization.slice(7) : undefined, token)) return undefined;
  return { status: 401, body: { error: 'unauthorized', message: '/metrics needs the METRICS_TOKEN bearer token' } };
}

export async function startOpsServer(opts: {
  port: number;
  host: string;
  registry: Registry;
  isReady: () => boolean;
  /** Liveness: false once the process cannot recover by itself (its store client ended): /healthz answers 503. */
  isAlive?: () => boolean;
  /** More of the liveness answer: its fields join `ok` in the body; `alive: false` fails it too. */
  health?: () => { alive: boolean } & Record<string, unknown>;
  /** Who reads /metrics (metricsRefusal). */
  metricsAccess: MetricsAccess;
  /** Serve only /metrics (the API's separate metrics port: its health is on PORT). */
  metricsOnly?: boolean;
  /** Names the variable of the port in the error when it is taken. */
  portSetting?: string;
}): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/healthz' && !opts.metricsOnly) {
      const { alive: more = true, ...detail } = opts.health?.() ?? {};
      const alive = (opts.isAlive?.() ?? true) && more;
      res
        .writeHead(alive ? 200 : 503, { 'content-type': 'application/json' })
        .end(JSON.stringify({ ok: alive, ...detail }));
    } else if (path === '/readyz' && !opts.metricsOnly) {
      const ready = opts.isReady();
      res.writeHead(ready ? 200 : 503, { 'content-type': 'application/json' }).end(JSON.stringify({ ready }));
    } else if (path === '/metrics') {
      const refusal = metricsRefusal(opts.metricsAccess, req.headers.authorization);
      if (refusal) {
        const challenge = refusal.status === 401 ? { 'www-authenticate': 'Bearer' } : {};
        res
          .writeHead(refusal.status, { 'content-type': 'application/json', ...challenge })
          .end(JSON.stringify(refusal.body));
        return;
      }
      opts.registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': opts.registry.contentType }).end(text),
        () => res.writeHead(500).end(),
      );
    } else {
      res.writeHead(404).end();
    }
  });
  const port = await listen(server, opts.port, opts.host, opts.portSetting ?? 'port');
  return { server, port };
}
