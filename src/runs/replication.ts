/**
 * Which writes wait for replicas (REDIS_MIN_REPLICAS), and why only these:
 * - `intake`: a run's creation, before its 201. A run the caller was told exists must survive a failover, or the
 *   caller is told to retry (503 + Retry-After) and its Idempotency-Key finds the run if it did survive.
 * - `dispatch`: an action's intent (`dispatched`), before its request leaves. The wait covers every earlier write
 *   to the run's master too: the step's journalled decision, the action's plan (arguments, idempotency key). A lost
 *   decision would ask the model again and a new answer could be a second, different email.
 * Not waited for: a step's commit and an action's confirmed outcome. Losing either sends the run back to a state a
 * replica has (the journalled decision, a `dispatched` record) from which recovery replays the journal and
 * reconciles the action with its service by key: slower, never a second effect. The next dispatch's wait covers
 * them anyway (the replication stream is ordered).
 */
import type { EngineContext } from './engineContext.js';
import { NotReplicatedError, replicated, type Witness } from '../store/replicated.js';
import { storeUnavailable } from '../store/unavailable.js';

export type ReplicatedWrite = 'intake' | 'dispatch';

/**
 * Waits until the writes made so far to `runId`'s master are on REDIS_MIN_REPLICAS replicas (NotReplicatedError if
 * not). `witness`: the write the wait is for (default: the run's hash), which must be on the server the wait ran on.
 */
export async function runReplicated(
  ctx: Pick<EngineContext, 'redis' | 'replicaWaits' | 'keys' | 'cfg' | 'metrics'>,
  runId: string,
  write: ReplicatedWrite,
  witness: Witness = { key: ctx.keys.run(runId).run, field: 'status' },
): Promise<void> {
  const { REDIS_MIN_REPLICAS: minReplicas, REDIS_REPLICA_WAIT_MS: timeoutMs, STORE_RETRY_AFTER_S: retryS } = ctx.cfg;
  if (minReplicas <= 0) return;
  const end = ctx.metrics.replicationWaits.startTimer({ write });
  try {
    const fence = ctx.keys.replicaFence(ctx.keys.shardOf(runId));
    const conn = ctx.replicaWaits ?? ctx.redis;
    await replicated(conn, fence, { minReplicas, timeoutMs }, retryS * 1000, witness);
    end({ outcome: 'ok' });
  } catch (err) {
    // A wait that met a failover (the master gone, the slot moved) could not confirm anything: not replicated, retry
    // later (a step waits without spending an attempt, intake answers 503), never a step error.
    const notReplicated =
      err instanceof NotReplicatedError
        ? err
        : storeUnavailable(err)
          ? new NotReplicatedError(0, minReplicas, retryS * 1000)
          : undefined;
    end({ outcome: notReplicated ? 'not_replicated' : 'error' });
    throw notReplicated ?? err;
  }
}

/**
 * The wait before a request leaves for an action (a dispatch, or a reconciler's same-key replay), witnessed by the
 * action's record in `state` on the server the wait ran on.
 */
export function actionReplicated(
  ctx: Pick<EngineContext, 'redis' | 'replicaWaits' | 'keys' | 'cfg' | 'metrics'>,
  rec: { runId: string; actionId: string },
  state: 'dispatched' | 'outcome_unknown',
): Promise<void> {
  const witness = { key: ctx.keys.action(rec.runId, rec.actionId), field: 'state', expect: state };
  return runReplicated(ctx, rec.runId, 'dispatch', witness);
}
