/**
 * The operator console at /console: runs listed and filtered, a run's page
 * (input, conversation, effects with their ledger history, budget, live
 * updates over the run's event stream), and forms to approve or reject, to
 * resolve a human-queue item, to cancel and to retry a stopped run; all through the same actions as
 * the JSON API (src/http/operators/actions.ts), so the same identity,
 * role, tenant and journal rules hold.
 *
 * Login (loginRoutes.ts): the operator's token or JWT in a form -> a session
 * cookie (session.ts), or a bearer header on every request; access.ts guards
 * every page and form. Every response sets a strict Content-Security-Policy
 * (no inline script or style), no-store and nosniff.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import express, { Router } from 'express';
import type { Compensations } from '../../ledger/compensation.js';
import type { Ledger } from '../../ledger/ledger.js';
import type { EngineContext } from '../../runs/engineContext.js';
import { VersionRegistry } from '../../runs/versions.js';
import { param } from '../../producer/fieldErrors.js';
import { directoryFor } from '../operatorIdentity.js';
import { consoleGuard } from './access.js';
import { mountForms } from './formRoutes.js';
import { mountLogin } from './loginRoutes.js';
import { mountPages } from './pageRoutes.js';
import { CONSOLE } from './pages.js';
import type { ConsoleSessions } from './session.js';

export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
/** Static files, read once: htmx from its npm package (exact version in package.json), ours from ./static. */
function staticFiles(): Map<string, { type: string; body: Buffer }> {
  return new Map([
    ['htmx.min.js', { type: 'text/javascript', body: readFileSync(require.resolve('htmx.org/dist/htmx.min.js')) }],
    ['console.js', { type: 'text/javascript', body: readFileSync(join(here, 'static', 'console.js')) }],
    ['console.css', { type: 'text/css', body: readFileSync(join(here, 'static', 'console.css')) }],
  ]);
}

export function consoleRouter(
  ctx: EngineContext,
  ledger: Ledger,
  sessions: ConsoleSessions,
  compensations: Compensations,
): Router {
  const r = Router();
  const files = staticFiles();
  const dir = directoryFor(ctx);
  const versions = new VersionRegistry(ctx.redis, ctx.keys, ctx.cfg.VERSION_TTL_MS);
  const guard = consoleGuard(dir, sessions);

  r.use(CONSOLE, (_req, res, next) => {
    res.setHeader('content-security-policy', CONSOLE_CSP);
    res.setHeader('x-content-type-options', 'nosniff');
    res.setHeader('referrer-policy', 'no-referrer');
    res.setHeader('cache-control', 'no-store');
    next();
  });
  r.use(CONSOLE, express.urlencoded({ extended: false, limit: '16kb' }));

  r.get(`${CONSOLE}/static/:file`, (req, res) => {
    const f = files.get(param(req.params.file));
    if (!f) return void res.status(404).type('text/plain').send('not found');
    res.setHeader('cache-control', 'public, max-age=3600');
    res.type(f.type).send(f.body);
  });

  mountLogin(r, ctx, dir, sessions, guard);
  mountPages(r, { ctx, ledger, versions }, guard);
  mountForms(r, { ctx, ledger, compensations, versions }, guard);
  return r;
}
