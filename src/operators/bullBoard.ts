/**
 * Bull Board at /admin/queues: every shard's step queue, read-only unless
 * BULL_BOARD_READ_ONLY=false. Behind basic auth (BULL_BOARD_USER/PASSWORD) or
 * the operator token; with neither configured it is open (development only;
 * production config requires the operator token).
 */
import type express from 'express';
import type { NextFunction, Request, Response } from 'express';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import type { AppContext } from '../app/context.js';
import { bearer, tokenMatches } from '../producer/auth.js';

export const BULL_BOARD_PATH = '/admin/queues';

function basicCredentials(req: Request): { user: string; password: string } | undefined {
  const h = req.headers.authorization;
  if (!h?.startsWith('Basic ')) return undefined;
  const decoded = Buffer.from(h.slice(6), 'base64').toString('utf8');
  const i = decoded.indexOf(':');
  return i < 0 ? undefined : { user: decoded.slice(0, i), password: decoded.slice(i + 1) };
}

export function boardAuth(cfg: AppContext['cfg']) {
  const { BULL_BOARD_USER: user, BULL_BOARD_PASSWORD: password, OPERATOR_TOKEN: token } = cfg;
  const basicOn = user !== undefined && password !== undefined;
  return (req: Request, res: Response, next: NextFunction) => {
    if (!basicOn && token === undefined) return next();
    if (token !== undefined && tokenMatches(bearer(req), token)) return next();
    const basic = basicCredentials(req);
    // Both compares always run, so timing does not tell which half was wrong.
    if (basicOn && basic && tokenMatches(basic.user, user) && tokenMatches(basic.password, password) && basic.user.length > 0) return next();
    if (basicOn) res.setHeader('www-authenticate', 'Basic realm="bull-board", charset="UTF-8"');
    res.status(401).json({ error: 'unauthorized', message: 'bull board credentials or an operator token are required' });
  };
}

/**
 * The board is built on its first authorised request: building it opens every
 * shard's Queue (which writes the queue's meta key), and an API that serves
 * no operator should not touch the queues.
 */
export function mountBullBoard(app: express.Express, ctx: AppContext): void {
  let router: express.Router | undefined;
  const board = () => {
    if (router) return router;
    const serverAdapter = new ExpressAdapter();
    serverAdapter.setBasePath(BULL_BOARD_PATH);
    createBullBoard({
      queues: ctx.queues.all().map((q) => new BullMQAdapter(q, { readOnlyMode: ctx.cfg.BULL_BOARD_READ_ONLY })),
      // @bull-board/express 9.10.1 carries its own @bull-board/api 9.10.1 (the root one is 9.10.2): same shape, separate declarations.
      serverAdapter: serverAdapter as unknown as Parameters<typeof createBullBoard>[0]['serverAdapter'],
    });
    router = serverAdapter.getRouter() as express.Router;
    return router;
  };
  app.use(BULL_BOARD_PATH, boardAuth(ctx.cfg), (req, res, next) => board()(req, res, next));
}
