/** Typed call of src/store/lua/flowRecount-2.lua: the slot counters recomputed from the slots held. */
import type { RedisClient } from '../connect.js';
import type { FlowKeys } from '../keys.js';
import { script } from '../luaScripts.js';

/** A counter the script set right: what it said, and the slots really held. */
export interface Recounted {
  field: string;
  counted: number;
  held: number;
}

export async function flowRecount(redis: RedisClient, k: FlowKeys): Promise<Recounted[]> {
  const flat = (await script(redis, 'flowRecount')(k.held, k.counts)) as string[];
  const out: Recounted[] = [];
  for (let i = 0; i + 2 < flat.length; i += 3)
    out.push({ field: flat[i]!, counted: Number(flat[i + 1]), held: Number(flat[i + 2]) });
  return out;
}
