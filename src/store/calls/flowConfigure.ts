/** Typed call of src/store/lua/flowConfigure-2.lua: a weight or limit changed at run time, with who changed it. */
import type { RedisClient } from '../connect.js';
import type { FlowKeys } from '../keys.js';
import { script } from '../luaScripts.js';

export const FLOW_AUDIT_KEPT = 200;

export interface FlowChange {
  who: string;
  /** `weight` | `limit` | `agent_limit` */
  what: string;
  /** the tenant or agent */
  of: string;
  /** the new value ('' = back to the default) */
  to: string;
  at: number;
}

/** Returns the previous value ('' when it was the default). */
export async function flowConfigure(
  redis: RedisClient,
  k: FlowKeys,
  field: string,
  change: FlowChange,
): Promise<string> {
  return String(
    await script(redis, 'flowConfigure')(
      k.settings,
      k.audit,
      field,
      change.to,
      JSON.stringify(change),
      FLOW_AUDIT_KEPT,
    ),
  );
}
