/**
 * Fails loudly when a BullMQ upgrade changes the internals our atomic commit
 * relies on: the addStandardJob and addPrioritizedJob scripts, their key/argument layout, the lock key.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Job, Worker } from 'bullmq';
import { createHarness, type Harness } from '../../testkit/harness.js';
import {
  BULLMQ_ADD_KEYS,
  BULLMQ_FINISH_KEYS,
  bullmqAddPrioritizedJobFunction,
  bullmqAddStandardJobFunction,
  bullmqMoveToFinishedFunction,
  captureAddJob,
  captureAddStandardJob,
  captureMoveToCompleted,
  commitBullKeys,
  COMPLETED_TRIM_EVERY,
  completeFromCommit,
  fetchLoopState,
  forStepJobs,
  timeFetches,
} from '../../src/store/bullmqInternals.js';
import { buildLibrary } from '../../src/store/luaLibrary.js';
import { COMPLETED_WINDOW, STEP_JOB_NAME, stepJobOptions } from '../../src/store/queues.js';
import { until } from '../../testkit/until.js';

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
    const add = captureAddStandardJob(queue, STEP_JOB_NAME, { hello: 1 }, { jobId: 'probe-1', attempts: 2 });
    // Captured in BullMQ's synchronous part: a commit waits for no promise of it.
    expect(add).not.toBeInstanceOf(Promise);
    expect(add.keys).toHaveLength(BULLMQ_ADD_KEYS);
    expect(add.keys[0]).toBe(`${h.cfg.BULL_PREFIX}:steps-{0}:wait`);
    const lua = `${bullmqAddStandardJobFunction()}\nreturn bullmqAddStandardJob(KEYS, ARGV)`;
    const id = await h.ctx.redis.eval(lua, add.keys.length, ...add.keys, ...add.argv);
    expect(id).toBe('probe-1');
    const job = await queue.getJob('probe-1');
    expect(job?.data).toEqual({ hello: 1 });
    expect(job?.opts.attempts).toBe(2);
  });

  it('captures addPrioritizedJob for a job with a priority (what Job#addJob sends), and our copy adds it prioritized', async () => {
    expect(bullmqAddPrioritizedJobFunction()).toContain('local function bullmqAddPrioritizedJob(KEYS, ARGV)');
    const queue = h.ctx.queues.byShard(0);
    const opts = { ...stepJobOptions, jobId: 'probe-p', priority: 6, timestamp: 1_700_000_000_000 };
    let sent: (string | Buffer)[] = [];
    const client = {
      runCommand: (_name: string, args: (string | Buffer)[]) => {
        sent = args;
        return Promise.resolve('probe-p');
      },
    };
    await (
      new Job(queue, STEP_JOB_NAME, { p: 1 }, opts, opts.jobId) as unknown as { addJob(c: unknown): Promise<string> }
    ).addJob(client);
    const add = captureAddJob(queue, STEP_JOB_NAME, { p: 1 }, opts);
    expect(add.prioritized).toBe(true);
    expect([...add.keys, ...add.argv]).toEqual(sent);
    // Its keys are moveToFinished's of the same queue, plus `id`: a commit passes the same 15 keys for either add.
    const finishKeys = captureMoveToCompleted(
      new Job(queue, STEP_JOB_NAME, {}, {}, 'probe-f') as Job,
      'tok',
      false,
    ).keys;
    expect(commitBullKeys(add, { keys: finishKeys, argv: [] })).toEqual(
      commitBullKeys(captureAddJob(queue, STEP_JOB_NAME, {}, { jobId: 'probe-s' }), { keys: finishKeys, argv: [] }),
    );
    const lua = `${bullmqAddPrioritizedJobFunction()}\nreturn bullmqAddPrioritizedJob(KEYS, ARGV)`;
    expect(await h.ctx.redis.eval(lua, add.keys.length, ...add.keys, ...add.argv)).toBe('probe-p');
    expect(await queue.getJobState('probe-p')).toBe('prioritized');
    expect((await queue.getJob('probe-p'))?.priority).toBe(6);
  });

  it('adding a job sets the queue marker a spare SIGTERM wake-up writes to', async () => {
    const queue = h.ctx.queues.byShard(0);
    const key = h.ctx.keys.queueMarker(queue.name);
    await h.ctx.redis.del(key);
    await queue.add(STEP_JOB_NAME, {}, { jobId: 'probe-3' });
    expect(await h.ctx.redis.type(key)).toBe('zset');
  });

  it('the captured add is exactly what Job#addJob sends', async () => {
    const queue = h.ctx.queues.byShard(0);
    const opts = { ...stepJobOptions, jobId: 'probe-3', timestamp: 1_700_000_000_000 };
    const data = { v: 1, runId: 'r', step: 3 };
    let sent: (string | Buffer)[] = [];
    const client = {
      runCommand: (_name: string, args: (string | Buffer)[]) => {
        sent = args;
        return Promise.resolve('probe-3');
      },
    };
    await (
      new Job(queue, STEP_JOB_NAME, data, opts, opts.jobId) as unknown as { addJob(c: unknown): Promise<string> }
    ).addJob(client);
    const add = captureAddStandardJob(queue, STEP_JOB_NAME, data, opts);
    expect([...add.keys, ...add.argv]).toEqual(sent);
  });

  it('our embedded moveToFinished completes an active job and fetches the next, as the worker would', async () => {
    expect(bullmqMoveToFinishedFunction()).toContain('local function bullmqMoveToFinished(KEYS, ARGV)');
    const queue = h.ctx.queues.byShard(0);
    await queue.drain();
    await queue.add(STEP_JOB_NAME, { n: 1 }, { ...stepJobOptions, jobId: 'probe-4' });
    await queue.add(STEP_JOB_NAME, { n: 2 }, { ...stepJobOptions, jobId: 'probe-5' });
    const w = new Worker(queue.name, null, { connection: h.ctx.redis, prefix: h.ctx.keys.bullPrefix });
    const job = await w.getNextJob('tok-4');
    expect(job.id).toBe('probe-4');
    const finish = captureMoveToCompleted(job, 'tok-4', true);
    expect(finish.keys).toHaveLength(BULLMQ_FINISH_KEYS);
    // A commit sends moveToFinished's keys plus add's `id`; add's keys are found among them.
    const add = captureAddStandardJob(queue, STEP_JOB_NAME, {}, { ...stepJobOptions, jobId: 'probe-6' });
    expect(commitBullKeys(add, finish)).toEqual([...finish.keys, add.keys[3]]);
    const lua = `${bullmqMoveToFinishedFunction()}\nreturn bullmqMoveToFinished(KEYS, ARGV)`;
    const raw = await h.ctx.redis.eval(lua, finish.keys.length, ...finish.keys, ...finish.argv);
    expect(await queue.getJobState('probe-4')).toBe('completed');
    expect(await queue.getJobState('probe-5')).toBe('active');
    expect(await h.ctx.redis.get(h.ctx.keys.jobLock(0, 'probe-5'))).toBe('tok-4');
    // The worker's own completion call is answered from that reply, without a request.
    completeFromCommit(job, raw, Number(finish.argv[1]));
    const next = (await job.moveToCompleted(undefined, 'tok-4', true)) as unknown[];
    expect(JSON.parse((next[0] as { data: string }).data)).toEqual({ n: 2 });
    expect(next[1]).toBe('probe-5');
    expect(job.attemptsMade).toBe(1);
    await w.close();
  });

  it("our embedded copies append nothing to the queue's BullMQ event stream, nor trim it or read its cap; BullMQ's own scripts still append", async () => {
    for (const lua of [
      bullmqAddStandardJobFunction(),
      bullmqAddPrioritizedJobFunction(),
      bullmqMoveToFinishedFunction(),
    ]) {
      expect(lua).not.toContain('rcall("XADD"');
      expect(lua).not.toContain('rcall("XTRIM"');
      expect(lua).not.toContain('rcall("HGET", metaKey, "opts.maxLenEvents")');
    }
    const queue = h.ctx.queues.byShard(0);
    await queue.drain();
    const stream = `${h.ctx.keys.bullPrefix}:${queue.name}:events`;
    const eventsOf = async (jobId: string): Promise<string[]> =>
      ((await h.ctx.redis.xrange(stream, '-', '+')) as [string, string[]][])
        .filter(([, f]) => f[f.indexOf('jobId') + 1] === jobId)
        .map(([, f]) => f[f.indexOf('event') + 1]!);
    await queue.add(STEP_JOB_NAME, { n: 1 }, { ...stepJobOptions, jobId: 'probe-7' });
    expect(await eventsOf('probe-7')).toEqual(['added', 'waiting']);
    const add = captureAddStandardJob(queue, STEP_JOB_NAME, { n: 2 }, { ...stepJobOptions, jobId: 'probe-8' });
    await h.ctx.redis.eval(
      `${bullmqAddStandardJobFunction()}\nreturn bullmqAddStandardJob(KEYS, ARGV)`,
      add.keys.length,
      ...add.keys,
      ...add.argv,
    );
    const w = new Worker(queue.name, null, { connection: h.ctx.redis, prefix: h.ctx.keys.bullPrefix });
    const job = await w.getNextJob('tok-7');
    expect(job.id).toBe('probe-7');
    const finish = captureMoveToCompleted(job, 'tok-7', true);
    const lua = `${bullmqMoveToFinishedFunction()}\nreturn bullmqMoveToFinished(KEYS, ARGV)`;
    await h.ctx.redis.eval(lua, finish.keys.length, ...finish.keys, ...finish.argv);
    expect(await queue.getJobState('probe-7')).toBe('completed');
    expect(await queue.getJobState('probe-8')).toBe('active');
    // BullMQ's fetch appended `active`; our completion appended no `completed`, our add and fetch nothing.
    expect(await eventsOf('probe-7')).toEqual(['added', 'waiting', 'active']);
    expect(await eventsOf('probe-8')).toEqual([]);
    await w.close();
  });

  it("the commit's copies leave out what a step job never has; a BullMQ whose text moved stops the boot", () => {
    const commit = buildLibrary().code;
    expect(commit).not.toContain('rcall("SCARD", jobIdKey .. ":dependencies")');
    expect(commit).not.toContain('rcall("HMGET", jobIdKey, "parentKey", "parent", "deid")');
    expect(commit).not.toContain('local jobCounter = rcall("INCR"');
    // BullMQ's own scripts, which the other scripts embed whole, are as BullMQ ships them.
    expect(bullmqMoveToFinishedFunction()).toContain('rcall("SCARD", jobIdKey .. ":dependencies")');
    expect(bullmqAddStandardJobFunction()).toContain('local jobCounter = rcall("INCR", KEYS[4])');
    const take = 'local jobCounter = rcall("INCR", KEYS[4])';
    expect(forStepJobs('/x/addStandardJob-9.lua', take)).toBe(
      'local jobCounter = args[2] == "" and rcall("INCR", KEYS[4]) or ""',
    );
    // Gone, or there twice: the edit no longer knows what it changes.
    for (const text of ['local jobCounter = rcall("INCR", KEYS[5])', `${take}\n${take}`]) {
      expect(() => forStepJobs('/x/addStandardJob-9.lua', text)).toThrow(/internals changed/);
    }
    // A file no edit names is left as it is.
    expect(forStepJobs('/x/other.lua', take)).toBe(take);
  });

  it('a completion trims the completed window once in COMPLETED_TRIM_EVERY: never more than that many jobs past it', async () => {
    const queue = h.ctx.queues.byShard(1);
    await queue.drain();
    const w = new Worker(queue.name, null, { connection: h.ctx.redis, prefix: h.ctx.keys.bullPrefix });
    const completedKey = h.ctx.keys.queueKeyPrefix(1) + 'completed';
    const lua = `${bullmqMoveToFinishedFunction()}\nreturn bullmqMoveToFinished(KEYS, ARGV)`;
    const sizes: number[] = [];
    for (let i = 0; i < COMPLETED_WINDOW + 3 * COMPLETED_TRIM_EVERY; i++) {
      await queue.add(STEP_JOB_NAME, {}, { ...stepJobOptions, jobId: `window-${i}` });
      const job = await w.getNextJob(`tok-w${i}`);
      const finish = captureMoveToCompleted(job, `tok-w${i}`, false);
      await h.ctx.redis.eval(lua, finish.keys.length, ...finish.keys, ...finish.argv);
      sizes.push(await h.ctx.redis.zcard(completedKey));
    }
    const past = sizes.slice(COMPLETED_WINDOW + COMPLETED_TRIM_EVERY);
    expect(Math.max(...past)).toBeLessThan(COMPLETED_WINDOW + COMPLETED_TRIM_EVERY);
    expect(Math.max(...past)).toBeGreaterThan(COMPLETED_WINDOW);
    expect(Math.min(...past)).toBe(COMPLETED_WINDOW);
    await w.close();
  });

  it('the job lock lives where the fence reads it', async () => {
    const queue = h.ctx.queues.byShard(0);
    await queue.add(STEP_JOB_NAME, {}, { jobId: 'probe-2' });
    const w = new Worker(queue.name, null, { connection: h.ctx.redis, prefix: h.ctx.keys.bullPrefix });
    const job = await w.getNextJob('tok-xyz');
    expect(job?.id).toBeDefined();
    expect(await h.ctx.redis.get(h.ctx.keys.jobLock(0, job.id!))).toBe('tok-xyz');
    await w.close();
  });

  it("reads an idle worker's fetch loop: waiting on its marker, since when, no fetch under way, its blocking connection ready", async () => {
    // An empty shard of its own: the worker's loop drains it and waits on the marker.
    const queue = h.ctx.queues.byShard(0);
    const w = new Worker(`${queue.name}-idle`, async () => {}, {
      connection: h.ctx.redis,
      prefix: h.ctx.keys.bullPrefix,
      autorun: false,
      drainDelay: 5,
    });
    timeFetches(w);
    void w.run();
    // The wait's age grows while the loop waits on its marker: read once it is 100 ms old.
    const waited = () => {
      const s = fetchLoopState(w);
      return (s.markerWaitMs ?? 0) >= 100 && s;
    };
    const state = await until('a marker wait 100 ms old', 5000, waited);
    await w.close(true);
    expect(state).toMatchObject({ fetchMs: undefined, drained: true, running: true, closing: false });
    expect(state.markerWaitMs).toBeGreaterThanOrEqual(100);
    expect(state.markerWaitMs).toBeLessThan(6000);
    expect(state.inLoop).toBe(1);
    expect(state.blockingStatus).toBe('ready');
  });
});
