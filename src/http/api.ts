/** The HTTP API: run intake and views, health, metrics. */
import express, { type NextFunction, type Request, type Response } from 'express';
import type { EngineContext } from '../runs/engineContext.js';
import { metricsRefusal } from './opsServer.js';
import { bearer, requireRunAccess, requireRunCreation, runNotFound, seesDeployment } from './auth.js';
import {
  BODY_LIMIT,
  BODY_LIMIT_BYTES,
  bodyIllFormed,
  bodyTooDeep,
  illFormedStringPath,
  nestedDeeperThan,
} from '../producer/bodyLimits.js';
import { answerRequestError } from './requestErrors.js';
import { jsonBody } from './jsonBody.js';
import { foundRun, InvalidRunRequest, startRun, unknownAgent } from '../producer/intake.js';
import { createRunSchemaFor } from '../producer/schemas.js';
import { deliver, eventBodySchema } from '../producer/events.js';
import { answerJson, invalid } from '../producer/fieldErrors.js';
import { EVENT_KEY_FORMAT } from '../runs/spec.js';
import { archivedRunView, runView, type EffectsLister } from './runView.js';
import { storeErrorAnswered, storeGate } from './storeUnavailable.js';
import { lineFullAnswered } from './lineFull.js';
import { storeEnded, storeWritable } from '../store/connect.js';

/** /readyz's store check answers within this (a lost master must not hang the probe). */
const READY_PING_MS = 1000;

export interface ApiOptions {
  listEffects?: EffectsLister;
  /**
   * Routes in front of the API's store gate and JSON parser, mounted first in the same app (the signed webhooks read
   * their raw body). One app, not the API mounted in another: each app a request passes sets its prototypes again and
   * walks its own router, on every create.
   */
  front?: (app: express.Express) => void;
  /** Extra routers mounted by later layers (operators, Bull Board). */
  mount?: (app: express.Express) => void;
  isReady?: () => boolean;
}

export function createApi(ctx: EngineContext, opts: ApiOptions = {}): express.Express {
  const app = express();
  app.disable('x-powered-by');
  opts.front?.(app);
  app.use(storeGate(ctx));
  app.use(jsonBody(BODY_LIMIT, BODY_LIMIT_BYTES));
  app.use((req, res, next) => {
    if (nestedDeeperThan(req.body)) return void bodyTooDeep(res);
    const illFormed = illFormedStringPath(req.body);
    return illFormed === undefined ? void next() : void bodyIllFormed(res, illFormed);
  });

  // Liveness fails once the store client ended on its own (storeEnded): only a restart reconnects it.
  app.get('/healthz', (_req, res) => {
    const alive = !storeEnded(ctx.redis);
    res.status(alive ? 200 : 503).json({ ok: alive });
  });
  app.get('/readyz', async (_req, res) => {
    const ready = (opts.isReady?.() ?? true) && (await storeWritable(ctx.redis, READY_PING_MS));
    res.status(ready ? 200 : 503).json({ ready });
  });
  // With API_METRICS_PORT set, /metrics is served there (src/server/api.ts), not on PORT.
  if (ctx.cfg.API_METRICS_PORT === 0) {
    app.get('/metrics', async (req, res) => {
      const refusal = metricsRefusal(ctx.cfg, req.headers.authorization);
      if (refusal) {
        if (refusal.status === 401) res.setHeader('www-authenticate', 'Bearer');
        return void res.status(refusal.status).json(refusal.body);
      }
      res.type(ctx.metrics.registry.contentType).send(await ctx.metrics.registry.metrics());
    });
  }

  app.post('/v1/runs', requireRunCreation(ctx.cfg), async (req, res) => {
    const parsed = createRunSchemaFor(ctx.agents, req.body).safeParse(req.body);
    if (!parsed.success) {
      return void invalid(res, parsed.error);
    }
    // The Idempotency-Key names the intake event: a new key on the same subject is a follow-up run.
    const header = req.header('idempotency-key');
    if (header !== undefined && !EVENT_KEY_FORMAT.test(header)) {
      res.status(400).json({
        error: 'invalid_request',
        fields: [{ path: 'Idempotency-Key', message: '1 to 200 visible ASCII characters, no spaces' }],
      });
      return;
    }
    try {
      const { runId, created, previousRunId } = await startRun(ctx, parsed.data, header);
      if (created) return void answerJson(res, 201, { runId, created, ...(previousRunId ? { previousRunId } : {}) });
      // The same event again (or, with no event named, the subject's latest run).
      answerJson(res, 200, await foundRun(ctx, runId));
    } catch (err) {
      if (err instanceof InvalidRunRequest) {
        res.status(400).json({ error: 'invalid_request', fields: err.fieldsFor(seesDeployment(ctx.cfg, bearer(req))) });
        return;
      }
      throw err;
    }
  });

  // An outside event for a run waiting on its key (src/producer/events.ts), tenant-scoped like run creation.
  app.post('/v1/events', requireRunCreation(ctx.cfg), async (req, res) => {
    const parsed = eventBodySchema.safeParse(req.body);
    if (!parsed.success) return void invalid(res, parsed.error);
    if (!ctx.agents.get(parsed.data.agent)) {
      const refusal = unknownAgent(ctx, parsed.data.agent, 'agent');
      return void res
        .status(400)
        .json({ error: 'invalid_request', fields: refusal.fieldsFor(seesDeployment(ctx.cfg, bearer(req))) });
    }
    const out = await deliver(ctx, parsed.data);
    if (out.kind === 'too_large')
      return void res
        .status(413)
        .json({ error: 'payload_too_large', field: 'payload', limit: out.limit, max: out.max });
    if (out.kind === 'kept_limit')
      return void res
        .status(429)
        .setHeader('retry-after', String(Math.ceil(out.retryAfterMs / 1000)))
        .json({ error: 'kept_deliveries_limit', limit: out.limit, max: out.max });
    // `no_wait` is never the answer here (deliver keeps what no wait takes); the check narrows the type.
    if (out.kind === 'duplicate' || out.kind === 'no_wait') {
      const message = 'the wait on this key already has a delivery, or one is kept for it';
      return void res.status(409).json({ error: 'duplicate_delivery', message });
    }
    const answer =
      out.kind === 'resumed' ? { outcome: 'resumed', runId: out.runId } : { outcome: 'kept', expiresAt: out.expiresAt };
    // The same eventId again: the first answer, nothing delivered.
    if (out.seen) return void res.status(200).json({ ...answer, duplicate: true });
    res.status(202).json(answer);
  });

  app.get('/v1/runs/:id', requireRunAccess(ctx), async (req, res) => {
    const view = (await runView(ctx, req.params.id, opts.listEffects)) ?? (await archivedRunView(ctx, req.params.id));
    if (!view) return void runNotFound(res);
    res.json(view);
  });

  opts.mount?.(app);

  app.use((err: Error & { status?: number; type?: string }, _req: Request, res: Response, _next: NextFunction) => {
    if (answerRequestError(err, res, ctx.log)) return;
    if (storeErrorAnswered(ctx, err, res)) return;
    if (lineFullAnswered(err, res)) return;
    ctx.log.error({ code: 'api_error', err }, 'request failed');
    res.status(err.status ?? 500).json({ error: 'internal_error' });
  });
  return app;
}
