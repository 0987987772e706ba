/**
 * The bundled sandbox service: a real HTTP server standing in for a support
 * system (tickets), an email provider (emails) and a payments service
 * (refunds), with Idempotency-Key semantics, switchable faults and exact
 * counts of committed effects.
 *
 * Routes: POST|GET /v1/{tickets,emails,refunds}, GET /v1/{resource}/{id},
 * GET /v1/kb?q=, GET /v1/customers/{email}, GET /healthz, /_sandbox/* (admin).
 * An unexpected handler error answers 500 (or drops the socket if the
 * answer had started); the server keeps serving.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { handleAdmin } from './admin.js';
import { Delays, type SandboxContext } from './context.js';
import { createEffect, getEffect, lookupEffect } from './effects.js';
import { FaultPlan } from './faults.js';
import { sendJson } from './http.js';
import { customerRead, kbRead } from './reads.js';
import { Store } from './store.js';
import { isEffectResource, type FaultRule, type SandboxCounts } from './types.js';

export interface SandboxOptions {
  /** 0 or unset: a free port. */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** PRNG seed for probabilistic faults. Default 1. */
  seed?: number;
  /** Clock for created_at, injectable for deterministic records. Default Date.now. */
  now?: () => number;
}

export interface SandboxHandle {
  url: string;
  port: number;
  close(): Promise<void>;
  setFaults(rules: FaultRule[]): void;
  addFaults(rules: FaultRule[]): void;
  clearFaults(): void;
  counts(): SandboxCounts;
  /** Clear records, counts and faults, and restart the fault PRNG from the seed. */
  reset(): void;
}

export async function startSandbox(opts: SandboxOptions = {}): Promise<SandboxHandle> {
  const now = opts.now ?? Date.now;
  const ctx: SandboxContext = { store: new Store(now), faults: new FaultPlan(opts.seed ?? 1), delays: new Delays() };
  const reset = () => {
    ctx.store = new Store(now);
    ctx.faults.reset();
  };

  const server = createServer((req, res) => {
    route(ctx, req, res, reset).catch(() => {
      if (!res.headersSent) sendJson(res, 500, { error: 'internal_error' });
      else res.destroy();
    });
  });
  // Benchmark clients hold connections open between bursts; keep them longer than undici's 4s default.
  server.keepAliveTimeout = 10_000;

  const host = opts.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const urlHost = host.includes(':') ? `[${host}]` : host;

  return {
    url: `http://${urlHost}:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve, reject) => {
        ctx.delays.cancelAll();
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
    setFaults: (rules) => ctx.faults.set(rules),
    addFaults: (rules) => ctx.faults.add(rules),
    clearFaults: () => ctx.faults.clear(),
    counts: () => ctx.store.counts(),
    reset,
  };
}

async function route(ctx: SandboxContext, req: IncomingMessage, res: ServerResponse, reset: () => void): Promise<void> {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  const method = req.method ?? 'GET';

  if (path === '/healthz') return sendJson(res, 200, { ok: true });
  if (path.startsWith('/_sandbox/')) return handleAdmin(ctx, req, res, path, reset);
  if (!path.startsWith('/v1/')) return sendJson(res, 404, { error: 'not_found' });

  ctx.store.requests += 1;
  const query = new URLSearchParams(q === -1 ? '' : url.slice(q + 1));
  const parts = path.slice(4).split('/');
  const [resource = '', sub, ...rest] = parts;
  if (rest.length > 0 || sub === '') return sendJson(res, 404, { error: 'not_found' });

  if (resource === 'kb' && sub === undefined) {
    return method === 'GET' ? kbRead(ctx, res, query) : methodNotAllowed(res, 'GET');
  }
  if (resource === 'customers' && sub !== undefined) {
    if (method !== 'GET') return methodNotAllowed(res, 'GET');
    const email = decode(sub);
    return email === undefined ? sendJson(res, 400, { error: 'invalid_path' }) : customerRead(ctx, res, email);
  }
  if (!isEffectResource(resource)) return sendJson(res, 404, { error: 'unknown_resource' });
  if (sub === undefined) {
    if (method === 'POST') return createEffect(ctx, req, res, resource);
    if (method === 'GET') return lookupEffect(ctx, res, resource, query);
    return methodNotAllowed(res, 'GET, POST');
  }
  if (method !== 'GET') return methodNotAllowed(res, 'GET');
  const id = decode(sub);
  return id === undefined ? sendJson(res, 400, { error: 'invalid_path' }) : getEffect(ctx, res, resource, id);
}

function methodNotAllowed(res: ServerResponse, allow: string): void {
  sendJson(res, 405, { error: 'method_not_allowed' }, { allow });
}

function decode(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}
