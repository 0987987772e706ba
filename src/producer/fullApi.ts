/** The API with every layer mounted (run effects from the ledger, operators, Bull Board, webhooks). */
import type { AppContext } from '../app/context.js';
import { Ledger } from '../ledger/ledger.js';
import { createApi } from './api.js';

export function createFullApi(ctx: AppContext, isReady: () => boolean) {
  const ledger = new Ledger(ctx.redis, ctx.keys);
  return createApi(ctx, { isReady, listEffects: (runId) => ledger.listForRun(runId) });
}
