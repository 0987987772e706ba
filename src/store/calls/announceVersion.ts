/** Typed call of src/store/lua/announceVersion-1.lua: announce (or renew) one agent version a worker serves. */
import type { RedisClient } from '../connect.js';
import { script } from '../luaScripts.js';

export interface AnnounceVersionArgs {
  /** The announcement (JSON: worker id, version, tools hash, tool names); the same string on every renewal. */
  member: string;
  now: number;
  ttlMs: number;
}

/** Returns the number of live announcements of the agent after this one. */
export async function announceVersion(
  redis: RedisClient,
  k: { registry: string },
  a: AnnounceVersionArgs,
): Promise<number> {
  return Number(await script(redis, 'announceVersion')(k.registry, a.member, a.now, a.ttlMs));
}
