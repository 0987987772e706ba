/** The small HTTP port of worker and reconciler processes: /healthz, /readyz, /metrics. */
import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';
import { listen } from './boot.js';

/** `portSetting` names the variable of the port in the error when it is taken. */
export async function startOpsServer(opts: { port: number; host: string; registry: Registry; isReady: () => boolean; portSetting?: string }): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/healthz') {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    } else if (path === '/readyz') {
      const ready = opts.isReady();
      res.writeHead(ready ? 200 : 503, { 'content-type': 'application/json' }).end(JSON.stringify({ ready }));
    } else if (path === '/metrics') {
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
