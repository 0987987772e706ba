/** Typed call of src/store/lua/leaveHumanQueue-2.lua: a compensated original out of the human queue. */
import type { RedisClient } from '../connect.js';
import { script } from '../luaScripts.js';

export interface LeaveHumanQueueKeys {
  /** The shard's human queue. */
  humanQueue: string;
  /** The run's hash. */
  run: string;
}

/** Whether the action was queued. `retentionMs`: the run's retention at its end (retentionAtEnd), or none. */
export async function leaveHumanQueue(
  redis: RedisClient,
  k: LeaveHumanQueueKeys,
  a: { actionId: string; retentionMs?: number | undefined },
): Promise<boolean> {
  const removed = (await script(redis, 'leaveHumanQueue')(
    k.humanQueue,
    k.run,
    a.actionId,
    a.retentionMs ?? '',
  )) as number;
  return removed === 1;
}
