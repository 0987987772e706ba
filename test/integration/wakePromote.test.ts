/**
 * A delivery that lands between a wait's registration and its wake job's add: the deliverer finds no job to
 * promote, so the worker promotes the job it adds (RedisStepStore.addWakeJob). Without that, the run would sleep
 * until its wait's timeout with its event delivered.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deliver } from '../../src/producer/events.js';
import { RunSpecCache } from '../../src/runs/store.js';
import { TranscriptCache } from '../../src/runs/transcriptCache.js';
import { waitIdOf } from '../../src/runs/waits.js';
import { stepJobId } from '../../src/store/keys.js';
import { RedisStepStore } from '../../src/worker/step/redisStore.js';
import { createHarness, type Harness } from '../../testkit/harness.js';

let h: Harness;
let store: RedisStepStore;
beforeAll(async () => {
  h = await createHarness('wake-promote');
  const { ctx } = h;
  store = new RedisStepStore({
    cfg: h.cfg,
    redis: ctx.redis,
    keys: ctx.keys,
    runs: ctx.store,
    specs: new RunSpecCache(ctx.store),
    transcripts: new TranscriptCache(),
    metrics: ctx.metrics,
  });
});
afterAll(async () => {
  await h.close();
});

const runId = 'r_0123456789abcdef01234567';
const HOUR = 3600_000;

describe('a wake job added after its event was delivered', () => {
  it('is promoted at once; one added with no delivery stays delayed until the timeout', async () => {
    const now = Date.now();
    const waitId = waitIdOf(runId, { step: 1, callId: 'call_1_0' });
    const reg = await store.awaitEvent({ tenant: 'acme', key: 'reply:P-1', waitId, at: now + HOUR, now, runId });
    expect(reg.kind).toBe('waiting');
    // The delivery comes before the wake job exists: nothing to promote yet.
    const r = await deliver(h.ctx, { tenant: 'acme', key: 'reply:P-1', payload: { ok: true } }, now);
    expect(r).toMatchObject({ kind: 'resumed', runId, waitId });
    const data = { v: 1 as const, runId, step: 2, used: { steps: 1, tokens: 0 }, wake: true };
    await store.addWakeJob(data, now + HOUR, { tenant: 'acme', key: 'reply:P-1', waitId });
    const queue = h.ctx.queues.forRun(runId);
    expect(await (await queue.getJob(stepJobId(runId, 2)))!.getState()).toBe('waiting');

    const other = 'r_0123456789abcdef01234568';
    const otherWait = waitIdOf(other, { step: 1, callId: 'call_1_0' });
    await store.awaitEvent({ tenant: 'acme', key: 'reply:P-2', waitId: otherWait, at: now + HOUR, now, runId: other });
    await store.addWakeJob({ ...data, runId: other }, now + HOUR, {
      tenant: 'acme',
      key: 'reply:P-2',
      waitId: otherWait,
    });
    expect(await (await h.ctx.queues.forRun(other).getJob(stepJobId(other, 2)))!.getState()).toBe('delayed');
  });
});
