/**
 * GET /runs/:id: the run view (the same data as GET /v1/runs/:id) as a small
 * read-only HTML page, the target of Bull Board's per-job link. Readable with
 * the board's basic-auth credentials (a browser reuses those it gave the
 * board: same realm) or any bearer token that may read the run (a tenant
 * token only its own runs, another tenant's run is 404 like an unknown one).
 */
import { Router, type NextFunction, type Request, type Response } from 'express';
import type { AppContext } from '../app/context.js';
import type { Ledger } from '../ledger/ledger.js';
import { bearer, principalOf, tenantScope } from '../producer/auth.js';
import { renderRunHtml, runView } from '../producer/view.js';
import { askForBoardCredentials, basicAuthOn, boardBasicMatches, RUN_PAGE_PATH } from './bullBoard.js';
import { param } from './http.js';

function pageAuth(ctx: AppContext) {
  return async (req: Request, res: Response, next: NextFunction) => {
    if (boardBasicMatches(ctx.cfg, req)) return next();
    const p = principalOf(ctx.cfg, bearer(req));
    // Open only when no credential of any kind is configured (development).
    if (!p || (p.role === 'open' && basicAuthOn(ctx.cfg))) {
      return void askForBoardCredentials(ctx.cfg, res, 'bull board credentials or a token that may read this run are required');
    }
    const scope = tenantScope(p);
    if (scope !== undefined && (await ctx.redis.hget(ctx.keys.run(param(req.params.id)).run, 'tenant')) !== scope) {
      return void res.status(404).type('text/plain').send('run not found');
    }
    next();
  };
}

export function runPageRouter(ctx: AppContext, ledger: Ledger): Router {
  const r = Router();
  r.get(`${RUN_PAGE_PATH}/:id`, pageAuth(ctx), async (req, res) => {
    const view = await runView(ctx, param(req.params.id), (runId) => ledger.listForRun(runId));
    res.setHeader('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
    res.setHeader('x-content-type-options', 'nosniff');
    res.setHeader('cache-control', 'no-store');
    if (!view) return void res.status(404).type('text/plain').send('run not found');
    res.type('html').send(renderRunHtml(view));
  });
  return r;
}
