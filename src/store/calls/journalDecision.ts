/**
 * Typed call of src/store/lua/journalDecision-5.lua: journal a step's decision (and charge its usage) before a write
 * runs.
 */
import type { RedisClient } from '../connect.js';
import { expectReply } from '../codes.js';
import { script } from '../luaScripts.js';

export interface JournalDecisionKeys {
  run: string;
  budget: string;
  journal: string;
  events: string;
  jobLock: string;
}

export interface JournalDecisionArgs {
  token: string;
  step: number;
  tokensDelta: number;
  /** µ$ the decision's attempts cost (charged with the tokens). */
  costDelta?: number | undefined;
  /** UTF-8 bytes the transcript grows by; undefined when the run's byte count is unknown (not kept for it). */
  contextBytesDelta: number | undefined;
  /** The decision entry as stored (JSON or compressed: packEntry). */
  entry: string | Buffer;
  now: number;
  eventsMaxLen: number;
  /** The `decision` event (JSON). */
  event: string;
  jobId: string;
  /** This delivery's step_started event (JSON), emitted before the decision. */
  startedEvent: string;
}

/**
 * Returns the decision's journal index; throws the FenceError of a refusal (lock lost, stale step, run missing/not
 * running, decision exists).
 */
export async function journalDecision(
  redis: RedisClient,
  k: JournalDecisionKeys,
  a: JournalDecisionArgs,
): Promise<number> {
  const res = await script(redis, 'journalDecision')(
    k.run,
    k.budget,
    k.journal,
    k.events,
    k.jobLock,
    a.token,
    a.step,
    a.tokensDelta,
    a.contextBytesDelta ?? '',
    a.entry,
    a.now,
    a.eventsMaxLen,
    a.event,
    a.jobId,
    a.startedEvent,
    a.costDelta ?? 0,
  );
  return Number(expectReply(res, { step: a.step }));
}
