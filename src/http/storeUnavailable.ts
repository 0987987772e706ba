/**
 * While the store cannot serve (a failover under way, the connection lost, a slot without a master, a write not
 * yet on enough replicas) a client is told to come back: 503 with Retry-After, on every route, never a 500. What
 * was written before is safe to ask for again: run intake is idempotent by its Idempotency-Key, operator moves by
 * compare-and-set.
 */
import type { NextFunction, Request, Response } from 'express';
import type { EngineContext } from '../runs/engineContext.js';
import { storeConnected } from '../store/connect.js';
import { storeUnavailable } from '../store/unavailable.js';

/** Liveness, readiness and metrics answer on their own while the store is away. */
const OWN_ANSWER = new Set(['/healthz', '/readyz', '/metrics']);

export function answerStoreUnavailable(res: Response, retryAfterS: number): void {
  res.status(503).setHeader('retry-after', String(retryAfterS)).json({
    error: 'store_unavailable',
    message: 'the store is failing over or unreachable: retry after the Retry-After seconds',
  });
}

/** Refuses a request at once while the client holds no connection (its commands would wait for one, unbounded). */
export function storeGate(ctx: Pick<EngineContext, 'redis' | 'cfg'>) {
  return (req: Request, res: Response, next: NextFunction): void => {
    if (OWN_ANSWER.has(req.path) || storeConnected(ctx.redis)) return next();
    answerStoreUnavailable(res, ctx.cfg.STORE_RETRY_AFTER_S);
  };
}

/** In an error handler: answers 503 + Retry-After (true) when `err` is the store being unavailable. */
export function storeErrorAnswered(ctx: Pick<EngineContext, 'cfg' | 'log'>, err: unknown, res: Response): boolean {
  if (!storeUnavailable(err) || res.headersSent) return false;
  ctx.log.warn({ code: 'store_unavailable', err }, 'store unavailable: 503');
  answerStoreUnavailable(res, ctx.cfg.STORE_RETRY_AFTER_S);
  return true;
}
