/**
 * The small HTTP port of worker and reconciler processes (and the API's API_METRICS_PORT): /healthz, /readyz, /metrics.
 */
import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';
import { tokenMatches } from './auth.js';
import { listen } from './listen.js';

/**
 * Whether a /metrics request may read: with METRICS_TOKEN set, only with
 * `Authorization: Bearer <METRICS_TOKEN>` (metrics name tenants and volumes).
 */
export function metricsAllowed(token: string | undefined, authorization: string | undefined): boolean {
  if (token === undefined) return true;
  return tokenMatches(authorization?.startsWith('Bearer ') ? authorization.slice(7) : undefined, token);
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
  /** METRICS_TOKEN: /metrics requires it as a bearer token when set. */
  metricsToken?: string;
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
      if (!metricsAllowed(opts.metricsToken, req.headers.authorization)) {
        res
          .writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Bearer' })
          .end('{"error":"unauthorized","message":"/metrics needs the METRICS_TOKEN bearer token"}');
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
