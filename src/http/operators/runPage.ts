/**
 * GET /runs/:id: the run view (the same data as GET /v1/runs/:id) as a small
 * read-only HTML page, the target of Bull Board's per-job link. Readable with
 * the board's basic-auth credentials (a browser reuses those it gave the
 * board: same realm) or any bearer token that may read the run (a tenant
 * token only its own runs, another tenant's run is 404 like an unknown one).
 */
import { Router, type NextFunction, type Request, type Response } from 'express';
import type { EngineContext } from '../../runs/engineContext.js';
import type { Ledger } from '../../ledger/ledger.js';
import {
  authUnconfigured,
  bearer,
  OPERATOR_SETTINGS,
  type SessionReader,
  principalFor,
  principalSees,
  runTokensConfigured,
} from '../auth.js';
import { archivedRunView, renderRunHtml, runView, type RunView } from '../runView.js';
import { isRunId } from '../../store/keys.js';
import { askForBoardCredentials, basicAuthOn, boardBasicMatches, RUN_PAGE_PATH } from './bullBoard.js';
import { param } from '../../producer/fieldErrors.js';
import { runTenant } from '../../operations/actor.js';

/** The page's one 404: malformed, another tenant's and unknown run ids alike. */
const pageNotFound = (res: Response) => void res.status(404).type('text/plain').send('run not found');

function pageAuth(ctx: EngineContext, session?: SessionReader) {
  return async (req: Request, res: Response, next: NextFunction) => {
    // Never open: with no credential of any kind configured the page is off (503 naming the settings).
    if (!basicAuthOn(ctx.cfg) && !runTokensConfigured(ctx)) {
      return void authUnconfigured(res, `BULL_BOARD_USER and BULL_BOARD_PASSWORD, or ${OPERATOR_SETTINGS}`);
    }
    const runId = param(req.params.id);
    if (boardBasicMatches(ctx.cfg, req)) return isRunId(runId) ? void next() : void pageNotFound(res);
    // A console session: the console's own page of the run (it acts, and updates live).
    if (bearer(req) === undefined && isRunId(runId) && (await session?.(req)))
      return void res.redirect(303, `/console/runs/${runId}`);
    const p = await principalFor(ctx, req);
    if (!p)
      return void askForBoardCredentials(
        ctx.cfg,
        res,
        'bull board credentials or a token that may read this run are required',
      );
    if (!isRunId(runId)) return void pageNotFound(res);
    if (!principalSees(p, (await runTenant(ctx, runId)) ?? null)) return void pageNotFound(res);
    next();
  };
}

export function runPageRouter(ctx: EngineContext, ledger: Ledger, session?: SessionReader): Router {
  const r = Router();
  r.get(`${RUN_PAGE_PATH}/:id`, pageAuth(ctx, session), async (req, res) => {
    const id = param(req.params.id);
    // Past Redis's retention the archive serves the same view.
    const view =
      (await runView(ctx, id, (runId) => ledger.listForRun(runId))) ??
      ((await archivedRunView(ctx, id)) as RunView | undefined);
    res.setHeader(
      'content-security-policy',
      "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    );
    res.setHeader('x-content-type-options', 'nosniff');
    res.setHeader('cache-control', 'no-store');
    if (!view) return void pageNotFound(res);
    res.type('html').send(renderRunHtml(view));
  });
  return r;
}
