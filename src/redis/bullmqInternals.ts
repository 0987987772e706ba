/**
 * The only module that touches BullMQ internals (outside its supported API).
 *
 * To make "commit step N" and "step N+1's job exists" one atomic change, our
 * commit scripts embed BullMQ's own addStandardJob Lua as a local function and
 * call it after the fence checks pass. BullMQ itself computes the script's keys
 * and arguments: we run `Job#addJob` against a capturing client that records the
 * call instead of sending it. test/bullmqInternals.test.ts fails loudly when a
 * BullMQ upgrade changes any of this (script name, key count, argument layout).
 */
import { Job, type JobsOptions, type Queue } from 'bullmq';
// Deep import on purpose: BullMQ ships its scripts as modules; pinned version.
import { addStandardJob } from 'bullmq/dist/esm/scripts/addStandardJob-9.js';

export const BULLMQ_ADD_KEYS = 9;
export const BULLMQ_ADD_ARGS = 3;

export interface CapturedAdd {
  keys: string[];
  argv: (string | Buffer)[];
}

/** Lua source of BullMQ's addStandardJob, wrapped as `local function bullmqAddStandardJob(KEYS, ARGV)`. */
export function bullmqAddStandardJobFunction(): string {
  if (addStandardJob.name !== 'addStandardJob' || addStandardJob.keys !== BULLMQ_ADD_KEYS) {
    throw new Error(`BullMQ internals changed: addStandardJob has ${addStandardJob.keys} keys`);
  }
  return `local function bullmqAddStandardJob(KEYS, ARGV)\n${addStandardJob.content}\nend\n`;
}

/**
 * The exact KEYS and ARGV BullMQ would send to add this job, computed by BullMQ.
 * Only standard jobs (no delay, no priority, no parent) are supported.
 */
export async function captureAddStandardJob(
  queue: Queue,
  name: string,
  data: unknown,
  opts: JobsOptions & { jobId: string },
): Promise<CapturedAdd> {
  if (opts.delay || opts.priority || opts.parent) {
    throw new Error('captureAddStandardJob supports standard jobs only');
  }
  let captured: { name: string; args: (string | Buffer)[] } | undefined;
  const capturingClient = {
    runCommand(commandName: string, args: (string | Buffer)[]) {
      captured = { name: commandName, args };
      return Promise.resolve(opts.jobId);
    },
  };
  const job = new Job(queue, name, data, opts, opts.jobId);
  await (job as unknown as { addJob(client: unknown): Promise<string> }).addJob(capturingClient);
  if (!captured || !captured.name.startsWith('addStandardJob:')) {
    throw new Error(`BullMQ internals changed: expected addStandardJob, got ${captured?.name ?? 'nothing'}`);
  }
  const all = captured.args;
  if (all.length !== BULLMQ_ADD_KEYS + BULLMQ_ADD_ARGS) {
    throw new Error(`BullMQ internals changed: addStandardJob took ${all.length} arguments`);
  }
  return {
    keys: all.slice(0, BULLMQ_ADD_KEYS).map(String),
    argv: all.slice(BULLMQ_ADD_KEYS),
  };
}

/** The queue's marker zset: a blocked worker's BZPOPMIN wakes on it (BullMQ >= 5). */
export function queueMarkerKey(bullPrefix: string, queueName: string): string {
  return `${bullPrefix}:${queueName}:marker`;
}

/**
 * Adds one more wake-up marker to a queue. After moveToWait BullMQ adds one
 * marker, which may be taken by the handing-back worker's own blocking
 * connection and dropped as it closes; a spare marker wakes another worker at
 * once (an idle worker pays one empty fetch for it).
 */
export async function wakeAnotherWorker(redis: { zadd(key: string, score: number, member: string): Promise<unknown> }, bullPrefix: string, queueName: string): Promise<void> {
  await redis.zadd(queueMarkerKey(bullPrefix, queueName), 0, '0');
}
