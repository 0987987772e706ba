/** The API with every layer mounted (run effects from the ledger, operators, Bull Board, webhooks). */
import express, { type NextFunction, type Request, type Response } from 'express';
import type { EngineContext } from '../runs/engineContext.js';
import { ledgerFor } from '../ledger/ledger.js';
import { mountOperators } from './operators/index.js';
import { webhooksRouter } from '../producer/webhooks.js';
import { createApi } from './api.js';
import { erasuresRouter } from './erasures.js';
import { answerRequestError } from './requestErrors.js';
import { OPENAPI_PATH, openApiDocument } from './openapi.js';
import { storeErrorAnswered, storeGate } from './storeUnavailable.js';

export function createFullApi(ctx: EngineContext, isReady: () => boolean): express.Express {
  const ledger = ledgerFor(ctx);
  const api = createApi(ctx, {
    isReady,
    listEffects: (runId) => ledger.listForRun(runId),
    mount: (app) => {
      mountOperators(app, ctx, ledger);
      app.use(erasuresRouter(ctx));
    },
  });
  // Signed webhooks need the raw body, so they sit in front of the API's JSON parser.
  const app = express();
  app.disable('x-powered-by');
  // Built on the first request: a process that is never asked for it does not pay for it.
  let document: ReturnType<typeof openApiDocument> | undefined;
  app.get(OPENAPI_PATH, (_req, res) => void res.json((document ??= openApiDocument(ctx.agents))));
  app.use(storeGate(ctx));
  app.use(webhooksRouter(ctx));
  app.use((err: Error & { status?: number; type?: string }, _req: Request, res: Response, next: NextFunction) => {
    if (!res.headersSent && answerRequestError(err, res, ctx.log)) return;
    if (storeErrorAnswered(ctx, err, res)) return;
    ctx.log.error({ code: 'webhook_error', err }, 'webhook failed');
    if (res.headersSent) return void next(err);
    res.status(err.status ?? 500).json({ error: 'internal_error' });
  });
  app.use(api);
  return app;
}
