/**
 * While the store cannot serve (a failover under way, the connection lost, a slot without a master, a write not
 * yet on enough replicas) a client is told to come back: 503 with Retry-After, on every route, never a 500. What
 * was written before is safe to ask for again: run intake is idempotent by its Idempotency-Key, operator moves by
 * compare-and-set. Redis at maxmemory refusing a write (OOM, under the noeviction policy the processes require) is
 * a 503 of its own, `store_full`, with Retry-After: nothing of the refused command was written.
 * Both are counted (agent_store_refusals_total{where="api"}).
 */
import type { NextFunction, Request, Response } from 'express';
import type { EngineContext } from '../runs/engineContext.js';
import { storeConnected } from '../store/connect.js';
import { storeFull, storeUnavailable } from '../store/unavailable.js';
import { NotReplicatedError } from '../store/replicated.js';

/** Liveness, readiness and metrics answer on their own while the store is away. */
const OWN_ANSWER = new Set(['/healthz', '/readyz', '/metrics']);

const UNREACHABLE = 'the store is failing over or unreachable: retry after the Retry-After seconds';

export function answerStoreUnavailable(res: Response, retryAfterS: number, message = UNREACHABLE): void {
  res.status(503).setHeader('retry-after', String(retryAfterS)).json({ error: 'store_unavailable', message });
}

/** The cause a 503 names: replicas that did not acknowledge the write are not a failover. */
function causeOf(err: unknown): string {
  for (let e = err; e instanceof Error; e = e.cause === e ? undefined : e.cause) {
    if (e instanceof NotReplicatedError)
      return (
        `the write reached ${e.acked} of the ${e.required} replicas REDIS_MIN_REPLICAS requires ` +
        '(a replica is down or behind): nothing was acknowledged; retry after the Retry-After seconds'
      );
  }
  return UNREACHABLE;
}

/** Refuses a request at once while the client holds no connection (its commands would wait for one, unbounded). */
export function storeGate(ctx: Pick<EngineContext, 'redis' | 'cfg'>) {
  return (req: Request, res: Response, next: NextFunction): void => {
    if (OWN_ANSWER.has(req.path) || storeConnected(ctx.redis)) return next();
    answerStoreUnavailable(res, ctx.cfg.STORE_RETRY_AFTER_S);
  };
}

const FULL =
  'the store is at its memory limit and refused the write (nothing was written): retry after the Retry-After seconds';

/**
 * In an error handler: answers 503 + Retry-After (true) when `err` is the store being unavailable
 * (`store_unavailable`) or full (`store_full`: Redis refused a write for memory).
 */
export function storeErrorAnswered(
  ctx: Pick<EngineContext, 'cfg' | 'log' | 'metrics'>,
  err: unknown,
  res: Response,
): boolean {
  if (res.headersSent) return false;
  if (storeFull(err)) {
    ctx.metrics.storeRefusals.inc({ reason: 'full', where: 'api' });
    ctx.log.warn({ code: 'store_full', err }, 'store full (Redis maxmemory): 503');
    res
      .status(503)
      .setHeader('retry-after', String(ctx.cfg.STORE_RETRY_AFTER_S))
      .json({ error: 'store_full', message: FULL });
    return true;
  }
  if (!storeUnavailable(err)) return false;
  ctx.metrics.storeRefusals.inc({ reason: 'unavailable', where: 'api' });
  ctx.log.warn({ code: 'store_unavailable', err }, 'store unavailable: 503');
  answerStoreUnavailable(res, ctx.cfg.STORE_RETRY_AFTER_S, causeOf(err));
  return true;
}
