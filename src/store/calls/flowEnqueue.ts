/** Typed call of src/store/lua/flowEnqueue-5.lua: a run into its tenant's line. */
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

/** Returns whether the run was put in line (false: it was already waiting or holding a slot). */
export async function flowEnqueue(
  redis: RedisClient,
  k: FlowKeys,
  line: string,
  runId: string,
  run: FlowRun,
  place: number,
): Promise<boolean> {
  const res = await script(redis, 'flowEnqueue')(
    k.waiting,
    k.held,
    k.turns,
    k.passes,
    line,
    runId,
    run.tenant,
    JSON.stringify(run),
    place,
  );
  return res === 1;
}
