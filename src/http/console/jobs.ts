/**
 * A run's past step jobs for its console page, linked to Bull Board: the job ids
 * come from the run's own `step_started` events (every delivery names its job),
 * plus the current job. A completed job is removed by the commit that completes it,
 * so most are gone; a failed one stays in its queue's failed set (with its error),
 * which is what a person looking at a stopped or retried run wants to open.
 * Bounded: the run's event stream is capped (EVENTS_MAX_LEN) and at most
 * MAX_JOBS ids are shown, the latest first.
 */
import type { EngineContext } from '../../runs/engineContext.js';
import { decodeEntries, unpackEntries } from '../../store/runEvents.js';

export interface RunJob {
  jobId: string;
  step: number;
  /** failed | finished | pending (in the queue, not finished) | removed (no longer in Redis) */
  state: 'failed' | 'finished' | 'pending' | 'removed';
}

const MAX_JOBS = 30;
const EVENTS_READ = 500;

export async function runJobs(ctx: EngineContext, runId: string, currentJobId: string): Promise<RunJob[]> {
  const k = ctx.keys.run(runId);
  const entries = (await ctx.redis.xrevrange(k.events, '+', '-', 'COUNT', EVENTS_READ)) as [string, string[]][];
  // An ended run's events are packed beside its stream (src/store/runEvents.ts), all older than the stream's.
  const packed = entries.length < EVENTS_READ ? unpackEntries(await ctx.redis.getBuffer(k.eventsPacked)) : [];
  const seen = new Map<string, number>();
  if (currentJobId) seen.set(currentJobId, -1);
  // XREVRANGE gives the newest entry first; its events in stream order, then all reversed: the latest job first.
  for (const { type, data } of decodeEntries([...packed, ...entries.reverse()]).reverse()) {
    if (type !== 'step_started') continue;
    try {
      const e = JSON.parse(data) as { jobId?: unknown; step?: unknown };
      if (typeof e.jobId === 'string' && !seen.has(e.jobId)) seen.set(e.jobId, typeof e.step === 'number' ? e.step : 0);
    } catch {
      // An event that does not parse names no job: skipped.
    }
    if (seen.size >= MAX_JOBS) break;
  }
  const ids = [...seen.keys()];
  const shard = ctx.keys.shardOf(runId);
  const pipe = ctx.redis.pipeline();
  for (const id of ids) pipe.hmget(ctx.keys.jobHash(shard, id), 'finishedOn', 'failedReason', 'data');
  const res = (await pipe.exec()) ?? [];
  return ids.map((jobId, i) => {
    const [finishedOn, failedReason, data] = (res[i]?.[1] ?? []) as (string | null)[];
    let step = seen.get(jobId)!;
    if (step < 0) step = stepOfData(data);
    const state: RunJob['state'] =
      data == null ? 'removed' : failedReason ? 'failed' : finishedOn ? 'finished' : 'pending';
    return { jobId, step, state };
  });
}

function stepOfData(data: string | null | undefined): number {
  try {
    const step = (JSON.parse(data ?? '') as { step?: unknown }).step;
    return typeof step === 'number' ? step : 0;
  } catch {
    return 0;
  }
}
