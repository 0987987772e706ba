/**
 * The baseline: a plain BullMQ chain. Each job adds the next job of its chain
 * (queue.add with a deterministic jobId, the engine's job options) and returns;
 * nothing else. Same Worker options as FleetWorker (src/worker/fleetWorker.ts).
 */
import { Queue, Worker, type Job } from 'bullmq';
import type { Config } from '../src/config/config.js';
import type { RedisClient } from '../src/store/connect.js';
import { STEP_JOB_NAME, stepJobOptions } from '../src/store/queues.js';

export interface PlainJobData {
  v: 1;
  runId: string;
  step: number;
  steps: number;
}

export const PLAIN_QUEUE = 'plain-{0}';

export const plainJobId = (chain: string, step: number): string => `${chain}.s${step}`;

export function plainQueue(redis: RedisClient, cfg: Config, name = PLAIN_QUEUE): Queue {
  return new Queue(name, { connection: redis, prefix: cfg.BULL_PREFIX });
}

/** Adds the first job of each chain (outside the measured window). */
export async function seedChains(queue: Queue, chainIds: string[], steps: number): Promise<void> {
  await Promise.all(
    chainIds.map((runId) => {
      const data: PlainJobData = { v: 1, runId, step: 1, steps };
      return queue.add(STEP_JOB_NAME, data, { ...stepJobOptions, jobId: plainJobId(runId, 1) });
    }),
  );
}

export function plainWorker(redis: RedisClient, cfg: Config, queue: Queue): Worker {
  const processor = async (job: Job): Promise<void> => {
    const d = job.data as PlainJobData;
    if (d.step >= d.steps) return;
    const next: PlainJobData = { ...d, step: d.step + 1 };
    await queue.add(STEP_JOB_NAME, next, { ...stepJobOptions, jobId: plainJobId(d.runId, d.step + 1) });
  };
  return new Worker(queue.name, processor, {
    connection: redis,
    prefix: cfg.BULL_PREFIX,
    concurrency: cfg.WORKER_CONCURRENCY,
    lockDuration: cfg.LOCK_DURATION_MS,
    stalledInterval: cfg.STALLED_INTERVAL_MS,
    maxStalledCount: cfg.MAX_STALLED_COUNT,
    autorun: false,
  });
}
