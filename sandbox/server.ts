/**
 * The bundled sandbox service: a real HTTP server speaking the wire of
 * Zendesk (tickets, under /api/v2), Resend (emails, /emails) and Stripe
 * (refunds, /v1/refunds, form-encoded), each with its own auth, bodies,
 * status codes, error shapes, Idempotency-Key window and replay marker
 * (sandbox/vendors/*), plus switchable faults and exact counts of committed
 * effects per Idempotency-Key (one key = one logical action).
 *
 * Routes: /api/v2/tickets* (Zendesk), /emails* (Resend), /v1/refunds* (Stripe),
 * the sandbox's own read endpoints GET /v1/kb?q= and GET /v1/customers/{email},
 * GET /healthz, /_sandbox/* (admin).
 * An unexpected handler error answers 500 (or drops the socket if the
 * answer had started); the server keeps serving.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { handleAdmin } from './admin.js';
import { Delays, type SandboxContext } from './context.js';
import { FaultPlan } from './faults.js';
import { sendJson } from './http.js';
import { customerRead, kbRead } from './reads.js';
import { Store } from './store.js';
import { type EffectResource, type FaultRule, type SandboxCounts, type SandboxRecord } from './types.js';
import { handleResend } from './vendors/resend.js';
import { handleStripe } from './vendors/stripe.js';
import { handleZendesk } from './vendors/zendesk.js';

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
  /**
   * Requests a slow_commit holds now (received, their commit or read not yet made): what a test waits on to know a
   * request arrived, or that none is still to land.
   */
  held(): number;
  /** Every record of a resource, oldest first (the failover campaign counts emails per recipient). */
  records(resource: EffectResource): SandboxRecord[];
  /** Clear records, counts and faults, and restart the fault PRNG from the seed (the clock and windows too). */
  reset(): void;
  /** Move the sandbox clock forward: keys older than their vendor's window are forgotten. */
  advanceClock(ms: number): void;
  /** Set a vendor's Idempotency-Key window (default: the documented one, DEFAULT_KEY_WINDOW_MS). */
  setKeyWindow(resource: EffectResource, ms: number): void;
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
    held: () => ctx.delays.held,
    records: (resource) => ctx.store.all(resource),
    reset,
    advanceClock: (ms) => ctx.store.advance(ms),
    setKeyWindow: (resource, ms) => {
      ctx.store.windows[resource] = ms;
    },
  };
}

async function route(ctx: SandboxContext, req: IncomingMessage, res: ServerResponse, reset: () => void): Promise<void> {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  const method = req.method ?? 'GET';

  if (path === '/healthz') return void sendJson(res, 200, { ok: true });
  if (path.startsWith('/_sandbox/')) return handleAdmin(ctx, req, res, path, reset);
  const query = new URLSearchParams(q === -1 ? '' : url.slice(q + 1));
  if (path.startsWith('/api/v2/')) {
    ctx.store.requests += 1;
    return handleZendesk(ctx, req, res, path, query);
  }
  if (path === '/emails' || path.startsWith('/emails/')) {
    ctx.store.requests += 1;
    return handleResend(ctx, req, res, path);
  }
  if (path === '/v1/refunds' || path.startsWith('/v1/refunds/')) {
    ctx.store.requests += 1;
    return handleStripe(ctx, req, res, path, query);
  }
  if (!path.startsWith('/v1/')) return void sendJson(res, 404, { error: 'not_found' });

  ctx.store.requests += 1;
  const parts = path.slice(4).split('/');
  const [resource = '', sub, ...rest] = parts;
  if (rest.length > 0 || sub === '') return void sendJson(res, 404, { error: 'not_found' });

  if (resource === 'kb' && sub === undefined) {
    return method === 'GET' ? kbRead(ctx, res, query) : void methodNotAllowed(res, 'GET');
  }
  if (resource === 'customers' && sub !== undefined) {
    if (method !== 'GET') return void methodNotAllowed(res, 'GET');
    const email = decode(sub);
    return email === undefined ? void sendJson(res, 400, { error: 'invalid_path' }) : customerRead(ctx, res, email);
  }
  return void sendJson(res, 404, { error: 'not_found' });
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
