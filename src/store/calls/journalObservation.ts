/**
 * Typed call of src/store/lua/journalObservation-5.lua: one tool call's observation journalled as soon as
 * the call finished (a step of several calls whose decision is journalled), fenced like the commit.
 */
import type { RedisClient } from '../connect.js';
import { expectReply } from '../codes.js';
import { script } from '../luaScripts.js';

export interface JournalObservationKeys {
  run: string;
  budget: string;
  journal: string;
  events: string;
  jobLock: string;
}

export interface JournalObservationArgs {
  token: string;
  step: number;
  jobId: string;
  /** The observation entry as stored (JSON or compressed: packEntry). */
  entry: string | Buffer;
  /** UTF-8 bytes the transcript grows by; undefined when the run keeps no byte count. */
  contextBytesDelta: number | undefined;
  eventsMaxLen: number;
  /** The `observation` event (JSON). */
  event: string;
}

/** Returns the journal's length; throws the FenceError of a refusal, or `invariant` when the decision is missing. */
export async function journalObservation(
  redis: RedisClient,
  k: JournalObservationKeys,
  a: JournalObservationArgs,
): Promise<number> {
  const res = await script(redis, 'journalObservation')(
    k.run,
    k.budget,
    k.journal,
    k.events,
    k.jobLock,
    a.token,
    a.step,
    a.jobId,
    a.entry,
    a.contextBytesDelta ?? '',
    a.eventsMaxLen,
    a.event,
  );
  return Number(expectReply(res, { step: a.step }));
}
