/** Typed call of src/store/lua/flowWake-8.lua: a run woken from a wait asks for a slot, or waits for one in line. */
import type { RedisClient } from '../connect.js';
import type { FlowKeys } from '../keys.js';
import { script } from '../luaScripts.js';
import { FLOW_STRIDE_SCALE } from '../../core/flowWeight.js';
import type { AdmitArgs } from './flowAdmit.js';
import type { FlowRun } from './flowEnqueue.js';

/** `held`: the run has a slot for this wake (or kept the one it parked with); `waiting`: it is in its line. */
export type WakeSlot = 'held' | 'waiting';

export async function flowWake(
  redis: RedisClient,
  k: FlowKeys,
  runId: string,
  run: FlowRun,
  place: number,
  limits: Pick<AdmitArgs, 'defaultWeight' | 'tenantLimit' | 'agentLimit' | 'fleetLimit' | 'configured'>,
): Promise<WakeSlot> {
  const res = await script(redis, 'flowWake')(
    k.waiting,
    k.held,
    k.pending,
    k.counts,
    k.turns,
    k.passes,
    k.settings,
    k.admitted,
    runId,
    JSON.stringify(run),
    k.linePrefix,
    limits.defaultWeight,
    limits.tenantLimit,
    limits.agentLimit,
    limits.fleetLimit,
    JSON.stringify(limits.configured),
    FLOW_STRIDE_SCALE,
    place,
  );
  return res === 0 ? 'waiting' : 'held';
}
