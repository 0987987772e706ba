/** Mounts every operator-facing router (approvals, reconciliation, cancel, live events, the run page, Bull Board). */
import type express from 'express';
import type { AppContext } from '../../bin/context.js';
import type { Ledger } from '../../ledger/ledger.js';
import { approvalsRouter } from './approvals.js';
import { mountBullBoard } from './bullBoard.js';
import { cancelRouter } from './cancel.js';
import { eventsRouter } from './events.js';
import { reconciliationsRouter } from './reconciliations.js';
import { runPageRouter } from './runPage.js';
import { runsListRouter } from './runsList.js';

export function mountOperators(app: express.Express, ctx: AppContext, ledger: Ledger): void {
  app.use(runsListRouter(ctx));
  app.use(approvalsRouter(ctx, ledger));
  app.use(reconciliationsRouter(ctx, ledger));
  app.use(cancelRouter(ctx));
  app.use(eventsRouter(ctx));
  app.use(runPageRouter(ctx, ledger));
  mountBullBoard(app, ctx);
}
