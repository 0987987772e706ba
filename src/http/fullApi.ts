/** The API with every layer mounted (run effects from the ledger, operators, Bull Board, webhooks). */
import type express from 'express';
import type { NextFunction, Request, Response } from 'express';
import type { EngineContext } from '../runs/engineContext.js';
import { ledgerFor } from '../ledger/ledger.js';
import { mountOperators } from './operators/index.js';
import { webhooksRouter } from '../producer/webhooks.js';
import { createApi } from './api.js';
import { erasuresRouter } from './erasures.js';
import { answerRequestError } from './requestErrors.js';
import { OPENAPI_PATH, openApiDocument } from './openapi.js';
import { storeErrorAnswered, storeGate } from './storeUnavailable.js';
import { lineFullAnswered } from './lineFull.js';

export function createFullApi(ctx: EngineContext, isReady: () => boolean): express.Express {
  const ledger = ledgerFor(ctx);
  // Built on the first request: a process that is never asked for it does not pay for it.
  let document: ReturnType<typeof openApiDocument> | undefined;
  return createApi(ctx, {
    isReady,
    listEffects: (runId) => ledger.listForRun(runId),
    // Signed webhooks need the raw body, so they sit in front of the API's JSON parser.
    front: (app) => {
      app.get(OPENAPI_PATH, (_req, res) => void res.json((document ??= openApiDocument(ctx.agents))));
      app.use(storeGate(ctx));
      app.use(webhooksRouter(ctx));
      app.use((err: Error & { status?: number; type?: string }, req: Request, res: Response, _next: NextFunction) => {
        if (!res.headersSent && answerRequestError(err, res, ctx.log)) return;
        if (storeErrorAnswered(ctx, err, res)) return;
        if (lineFullAnswered(err, res)) return;
        ctx.log.error({ code: 'webhook_error', err }, 'webhook failed');
        // An answer already under way cannot be changed: the connection is closed (as express's final handler does),
        // and the API's error handler further on never sees this error.
        if (res.headersSent) return void req.socket.destroy();
        res.status(err.status ?? 500).json({ error: 'internal_error' });
      });
    },
    mount: (app) => {
      mountOperators(app, ctx, ledger);
      app.use(erasuresRouter(ctx));
    },
  });
}
