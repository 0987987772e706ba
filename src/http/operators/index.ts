/**
 * Mounts every operator-facing router (run list, approvals, reconciliation, cancel, retry, the version queue, live
 * events, the run page, the console, schedules, Bull Board).
 */
import type express from 'express';
import type { EngineContext } from '../../runs/engineContext.js';
import type { Ledger } from '../../ledger/ledger.js';
import { approvalsRouter } from './approvals.js';
import { mountBullBoard } from './bullBoard.js';
import { cancelRouter } from './cancel.js';
import { retryRouter } from './retry.js';
import { eventsRouter } from './events.js';
import { operatorCompensations, reconciliationsRouter } from './reconciliations.js';
import { ConsoleSessions } from '../console/session.js';
import { consoleRouter } from '../console/router.js';
import { runPageRouter } from './runPage.js';
import { runsListRouter } from './runsList.js';
import { versionsRouter } from './versions.js';
import { schedulesRouter } from './schedules.js';
import { sessionsRouter } from './sessions.js';
import { flowRouter } from './flow.js';
import { spendRouter } from './spend.js';
import { Schedules } from '../../producer/schedules.js';

/**
 * The console's session cookie is accepted by the console, the GET routes a
 * console page reads (the run list, a run's event stream, the run page) and
 * Bull Board (one login for both); every other API route takes bearers only.
 */
export function mountOperators(app: express.Express, ctx: EngineContext, ledger: Ledger): void {
  const sessions = new ConsoleSessions(ctx);
  const session = sessions.reader();
  const compensations = operatorCompensations(ctx, ledger);
  app.use(runsListRouter(ctx, session));
  app.use(approvalsRouter(ctx, ledger));
  app.use(reconciliationsRouter(ctx, ledger, compensations));
  app.use(cancelRouter(ctx));
  app.use(retryRouter(ctx));
  app.use(versionsRouter(ctx, ledger));
  app.use(eventsRouter(ctx, {}, session));
  app.use(runPageRouter(ctx, ledger, session));
  app.use(consoleRouter(ctx, ledger, sessions, compensations));
  app.use(schedulesRouter(ctx, new Schedules(ctx)));
  app.use(sessionsRouter(ctx, sessions));
  app.use(flowRouter(ctx));
  app.use(spendRouter(ctx));
  mountBullBoard(app, ctx, session);
}
