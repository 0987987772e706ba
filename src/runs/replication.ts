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
import { NotReplicatedError, replicated } from '../store/replicated.js';

export type ReplicatedWrite = 'intake' | 'dispatch';

/**
 * Waits until the writes made so far to `runId`'s master are on REDIS_MIN_REPLICAS replicas (NotReplicatedError if
 * not).
 */
export async function runReplicated(
  ctx: Pick<EngineContext, 'redis' | 'keys' | 'cfg' | 'metrics'>,
  runId: string,
  write: ReplicatedWrite,
): Promise<void> {
  const { REDIS_MIN_REPLICAS: minReplicas, REDIS_REPLICA_WAIT_MS: timeoutMs, STORE_RETRY_AFTER_S: retryS } = ctx.cfg;
  if (minReplicas <= 0) return;
  const end = ctx.metrics.replicationWaits.startTimer({ write });
  try {
    await replicated(ctx.redis, ctx.keys.run(runId).run, { minReplicas, timeoutMs }, retryS * 1000);
    end({ outcome: 'ok' });
  } catch (err) {
    end({ outcome: err instanceof NotReplicatedError ? 'not_replicated' : 'error' });
    throw err;
  }
}
