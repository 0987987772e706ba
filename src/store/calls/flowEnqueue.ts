/** Typed call of src/store/lua/flowEnqueue-6.lua: a run into its tenant's line. */
import type { RedisClient } from '../connect.js';
import type { FlowKeys } from '../keys.js';
import { script } from '../luaScripts.js';

/** What flow control keeps of a run while it waits or holds a slot. */
export interface FlowRun {
  tenant: string;
  agent: string;
  shard: number;
  priority: number;
  /** ms it entered its line */
  at: number;
  /** ms it was admitted (held runs) */
  admittedAt?: number;
  /** The job its slot is for when that is not its step 1 job: a woken run's wake job, a resumed run's job. */
  jobId?: string;
  /**
   * The slot's generation, [step, resume] of that job (stepJobGeneration, src/store/keys.ts): a release for an older job frees
   * nothing. Absent: the oldest.
   */
  gen?: SlotGeneration;
}

/** A job's place in its run's life: its step, then how many resumes or retries came before it at that step. */
export type SlotGeneration = readonly [step: number, resume: number];

/** `queued`: put in line; `known`: already waiting or holding a slot; `full`: the line holds `maxWaiting` runs. */
export type EnqueueOutcome = 'queued' | 'known' | { full: number };

/**
 * Puts the run in its tenant's line unless it is known there or the line holds `maxWaiting` runs (the tenant's own
 * limit set at run time over it; 0: no limit; undefined: no check at all, the run is at work already). `full`: the
 * limit that held, as the script read it.
 */
export async function flowEnqueue(
  redis: RedisClient,
  k: FlowKeys,
  line: string,
  runId: string,
  run: FlowRun,
  place: number,
  maxWaiting?: number,
): Promise<EnqueueOutcome> {
  const res = await script(redis, 'flowEnqueue')(
    k.waiting,
    k.held,
    k.turns,
    k.passes,
    line,
    k.settings,
    runId,
    run.tenant,
    JSON.stringify(run),
    place,
    maxWaiting ?? '',
  );
  if (Array.isArray(res)) return { full: Number(res[1]) };
  return res === 1 ? 'queued' : 'known';
}
