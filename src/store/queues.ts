/** One BullMQ queue per shard (`steps-{N}`), sharing a connection; default job options live here. */
import { ErrorCode, Queue, type Job, type JobsOptions } from 'bullmq';
import type { RedisClient } from './connect.js';
import { type KeySpace, stepJobId } from './keys.js';

export const STEP_JOB_NAME = 'step';

/**
 * Failed processor attempts (an exception, not a fence) are retried by BullMQ
 * with backoff. A completed step job is removed by a later commit (the journal
 * holds what the step did), past a window of the latest COMPLETED_WINDOW per
 * queue that Bull Board shows: a fixed cost per shard, not per run. One commit
 * in COMPLETED_TRIM_EVERY of a worker process trims the window
 * (src/store/bullmqInternals.ts), so it holds up to that many more jobs per
 * worker process. Correctness never relies on jobId dedupe (BullMQ dedupes a custom jobId
 * only while the job's hash exists, so it ends when the hash is removed): the commit's
 * fence does.
 */
export const COMPLETED_WINDOW = 100;
/**
 * BullMQ's per-queue event stream cap (its default is 10,000; nothing here reads that stream but Bull Board's live
 * view).
 */
export const BULL_EVENTS_MAX_LEN = 1000;

export const stepJobOptions: JobsOptions = {
  attempts: 5,
  backoff: { type: 'exponential', delay: 500 },
  removeOnComplete: { count: COMPLETED_WINDOW },
  removeOnFail: { age: 7 * 24 * 3600 },
};

/**
 * Moves a delayed job to the queue now. False when it had left the delayed set first: several processes promote the
 * same job (an admission, the repair sweep, an event's delivery, a wake), and its delay can run out, so the job's
 * state read before a promotion may be stale when it lands (BullMQ answers JobNotInState). Any other failure throws.
 */
export async function promoteIfDelayed(job: Job): Promise<boolean> {
  try {
    await job.promote();
    return true;
  } catch (err) {
    if ((err as { code?: unknown } | null)?.code === ErrorCode.JobNotInState) return false;
    throw err;
  }
}

export class ShardQueues {
  private readonly queues = new Map<number, Queue>();

  /** @param onError connection errors (a Redis restart); without a listener BullMQ prints them raw. */
  constructor(
    readonly keys: KeySpace,
    private readonly connection: RedisClient,
    private readonly onError: (err: Error) => void = () => {},
  ) {}

  byShard(shard: number): Queue {
    let q = this.queues.get(shard);
    if (!q) {
      q = new Queue(this.keys.queueName(shard), {
        connection: this.connection,
        prefix: this.keys.bullPrefix,
        streams: { events: { maxLen: BULL_EVENTS_MAX_LEN } },
      });
      q.on('error', this.onError);
      this.queues.set(shard, q);
    }
    return q;
  }

  forRun(runId: string): Queue {
    return this.byShard(this.keys.shardOf(runId));
  }

  all(): Queue[] {
    return this.keys.allShards().map((s) => this.byShard(s));
  }

  jobOptions(runId: string, step: number): JobsOptions & { jobId: string } {
    return { ...stepJobOptions, jobId: stepJobId(runId, step) };
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((q) => q.close()));
  }
}
