/**
 * Fails loudly when a BullMQ upgrade changes the internals our atomic commit
 * relies on: the addStandardJob script, its key/argument layout, the lock key.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Worker } from 'bullmq';
import { createHarness, type Harness } from './support/harness.js';
import { BULLMQ_ADD_KEYS, bullmqAddStandardJobFunction, captureAddStandardJob, queueMarkerKey } from '../src/redis/bullmqInternals.js';
import { STEP_JOB_NAME } from '../src/runs/queues.js';

let h: Harness;
beforeAll(async () => {
  h = await createHarness('internals');
});
afterAll(async () => {
  await h.close();
});

describe('BullMQ internals', () => {
  it('captures the exact addStandardJob call BullMQ would make, and our embedded copy adds a real job', async () => {
    expect(bullmqAddStandardJobFunction()).toContain('local function bullmqAddStandardJob(KEYS, ARGV)');
    const queue = h.ctx.queues.byShard(0);
    const add = await captureAddStandardJob(queue, STEP_JOB_NAME, { hello: 1 }, { jobId: 'probe-1', attempts: 2 });
    expect(add.keys).toHaveLength(BULLMQ_ADD_KEYS);
    expect(add.keys[0]).toBe(`${h.cfg.BULL_PREFIX}:steps-{0}:wait`);
    const lua = `${bullmqAddStandardJobFunction()}\nreturn bullmqAddStandardJob(KEYS, ARGV)`;
    const id = await h.ctx.redis.eval(lua, add.keys.length, ...add.keys, ...add.argv);
    expect(id).toBe('probe-1');
    const job = await queue.getJob('probe-1');
    expect(job?.data).toEqual({ hello: 1 });
    expect(job?.opts.attempts).toBe(2);
  });

  it('adding a job sets the queue marker a spare SIGTERM wake-up writes to', async () => {
    const queue = h.ctx.queues.byShard(0);
    const key = queueMarkerKey(h.ctx.keys.bullPrefix, queue.name);
    await h.ctx.redis.del(key);
    await queue.add(STEP_JOB_NAME, {}, { jobId: 'probe-3' });
    expect(await h.ctx.redis.type(key)).toBe('zset');
  });

  it('the job lock lives where the fence reads it', async () => {
    const queue = h.ctx.queues.byShard(0);
    await queue.add(STEP_JOB_NAME, {}, { jobId: 'probe-2' });
    const w = new Worker(queue.name, null, { connection: h.ctx.redis as never, prefix: h.ctx.keys.bullPrefix });
    const job = await w.getNextJob('tok-xyz');
    expect(job?.id).toBeDefined();
    expect(await h.ctx.redis.get(h.ctx.keys.jobLock(0, job!.id!))).toBe('tok-xyz');
    await w.close();
  });
});
