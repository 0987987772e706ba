/** Typed call of src/store/lua/wakeRun-5.lua: a parked wait's run running again, the wait's result journalled. */
import type { RedisClient } from '../connect.js';
import { expectReply } from '../codes.js';
import { script } from '../luaScripts.js';

export interface WakeRunKeys {
  run: string;
  budget: string;
  journal: string;
  events: string;
  jobLock: string;
}

export interface WakeRunArgs {
  token: string;
  step: number;
  jobId: string;
  now: number;
  eventsMaxLen: number;
  retentionMs: number;
  /** The wait's result entries (JSON), none for a sleep (its result was journalled by its park); as stored (JSON or compressed: packEntry). */
  entries: (string | Buffer)[];
  contextBytesDelta: number | undefined;
  /** The `woke` event (JSON). */
  event: string;
  /** The children's spend, charged to the woken run with the resume (0 for other waits). */
  charge: { steps: number; tokens: number; cost?: number };
}

/** True when this call woke the run, false when an earlier delivery had; throws the FenceError of a refusal. */
export async function wakeRun(redis: RedisClient, k: WakeRunKeys, a: WakeRunArgs): Promise<boolean> {
  const res = await script(redis, 'wakeRun')(
    k.run,
    k.budget,
    k.journal,
    k.events,
    k.jobLock,
    a.token,
    a.step,
    a.jobId,
    a.now,
    a.eventsMaxLen,
    a.retentionMs,
    a.contextBytesDelta ?? '',
    a.event,
    a.charge.steps,
    a.charge.tokens,
    a.charge.cost ?? 0,
    ...a.entries,
  );
  return Number(expectReply(res, { step: a.step })) === 1;
}
