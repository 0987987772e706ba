/**
 * Bull Board at /admin/queues: every shard's step queue, read-only unless
 * BULL_BOARD_READ_ONLY=false. Behind basic auth (BULL_BOARD_USER/PASSWORD) or
 * the operator token; with neither configured it answers 503 naming them.
 *
 * Step jobs carry references only (run id, step, budget usage: see
 * stepJobDataSchema), and each job links to its run's page (/runs/:id, see
 * runPage.ts) through Bull Board's `externalJobUrl`.
 */
import type express from 'express';
import type { NextFunction, Request, Response } from 'express';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import type { EngineContext } from '../../runs/engineContext.js';
import { authUnconfigured, bearer, OPERATOR_SETTINGS, tokenMatches, type SessionReader } from '../auth.js';
import { directoryFor } from '../operatorIdentity.js';

export const BULL_BOARD_PATH = '/admin/queues';
/** The operator's HTML run page (src/http/operators/runPage.ts). */
export const RUN_PAGE_PATH = '/runs';

function basicCredentials(req: Request): { user: string; password: string } | undefined {
  const h = req.headers.authorization;
  if (!h?.startsWith('Basic ')) return undefined;
  const decoded = Buffer.from(h.slice(6), 'base64').toString('utf8');
  const i = decoded.indexOf(':');
  return i < 0 ? undefined : { user: decoded.slice(0, i), password: decoded.slice(i + 1) };
}

/** Whether the board's basic-auth credentials are configured. */
export function basicAuthOn(cfg: EngineContext['cfg']): boolean {
  return cfg.BULL_BOARD_USER !== undefined && cfg.BULL_BOARD_PASSWORD !== undefined;
}

/** True when the request carries the board's basic-auth credentials. */
export function boardBasicMatches(cfg: EngineContext['cfg'], req: Request): boolean {
  const { BULL_BOARD_USER: user, BULL_BOARD_PASSWORD: password } = cfg;
  if (user === undefined || password === undefined) return false;
  const basic = basicCredentials(req);
  if (!basic) return false;
  // Both compares always run, so timing does not tell which half was wrong.
  const userOk = tokenMatches(basic.user, user);
  const passwordOk = tokenMatches(basic.password, password);
  return userOk && passwordOk && basic.user.length > 0;
}

/** 401 asking a browser for the board's credentials (same realm as the board, so they are reused). */
export function askForBoardCredentials(cfg: EngineContext['cfg'], res: Response, message: string): void {
  if (basicAuthOn(cfg)) res.setHeader('www-authenticate', 'Basic realm="bull-board", charset="UTF-8"');
  res.status(401).json({ error: 'unauthorized', message });
}

/**
 * The board: its basic-auth credentials, or an operator (bearer, or the
 * console's session cookie when `session` is given) who sees every tenant,
 * since the board shows every shard's jobs. A viewer may look while the board
 * is read-only; only an operator when it is not.
 */
export function boardAuth(ctx: Pick<EngineContext, 'cfg' | 'metrics' | 'log'>, session?: SessionReader) {
  const { cfg } = ctx;
  const dir = directoryFor(ctx);
  return async (req: Request, res: Response, next: NextFunction) => {
    if (!basicAuthOn(cfg) && !dir.configured)
      return void authUnconfigured(res, `${OPERATOR_SETTINGS}, or BULL_BOARD_USER and BULL_BOARD_PASSWORD`);
    if (boardBasicMatches(cfg, req)) return void next();
    const token = bearer(req);
    const op = token !== undefined ? await dir.authenticate(token) : await session?.(req);
    if (op && op.tenants === '*' && (op.role === 'operator' || cfg.BULL_BOARD_READ_ONLY)) return void next();
    if (op)
      return void res.status(403).json({
        error: 'forbidden',
        message: `operator ${op.name} may not open the queues (needs every tenant${cfg.BULL_BOARD_READ_ONLY ? '' : ' and the operator role'})`,
      });
    askForBoardCredentials(cfg, res, 'bull board credentials or an operator token are required');
  };
}

/** Bull Board's per-job link: the run's page, shown on every job card. */
export function runLinkOf(job: { data?: unknown }): { href: string; displayText: string } {
  const data = (job.data ?? {}) as { runId?: unknown; step?: unknown };
  const runId = typeof data.runId === 'string' ? data.runId : '';
  const step = typeof data.step === 'number' ? ` step ${data.step}` : '';
  return { href: `${RUN_PAGE_PATH}/${encodeURIComponent(runId)}`, displayText: `run view: ${runId}${step}` };
}

/**
 * The board is built on its first authorised request: building it opens every
 * shard's Queue (which writes the queue's meta key), and an API that serves
 * no operator should not touch the queues.
 */
export function mountBullBoard(app: express.Express, ctx: EngineContext, session?: SessionReader): void {
  let router: express.Router | undefined;
  const board = () => {
    if (router) return router;
    const serverAdapter = new ExpressAdapter();
    serverAdapter.setBasePath(BULL_BOARD_PATH);
    createBullBoard({
      queues: ctx.queues
        .all()
        .map((q) => new BullMQAdapter(q, { readOnlyMode: ctx.cfg.BULL_BOARD_READ_ONLY, externalJobUrl: runLinkOf })),
      // @bull-board/express 9.10.1 carries its own @bull-board/api 9.10.1 (the root one is 9.10.2): same shape,
      // separate declarations.
      serverAdapter: serverAdapter as unknown as Parameters<typeof createBullBoard>[0]['serverAdapter'],
    });
    router = serverAdapter.getRouter() as express.Router;
    return router;
  };
  app.use(BULL_BOARD_PATH, boardAuth(ctx, session), (req, res, next) => board()(req, res, next));
}
