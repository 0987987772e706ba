/**
 * A delivery that lands between a wait's registration and its wake job's add: the deliverer finds no job to
 * promote, so the worker promotes the job it adds (RedisStepStore.addWakeJob); and when the worker died before
 * adding it (SIGKILLed at `after_commit`, a real process), the sweep's re-add is due at once, not at the wait's
 * timeout (RunStore.ensureCurrentStepJob). Without these the run would sleep until its timeout, its event delivered.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deliver } from '../../src/producer/events.js';
import { RunSpecCache } from '../../src/runs/store.js';
import { TranscriptCache } from '../../src/runs/transcriptCache.js';
import { waitIdOf } from '../../src/runs/waits.js';
import { stepJobId } from '../../src/store/keys.js';
import { RedisStepStore } from '../../src/worker/step/redisStore.js';
import { buildSpec } from '../../src/producer/intake.js';
import { replyKey } from '../../src/agents/support/tools/waitForReply.js';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { spawnWorker } from '../../testkit/processes.js';

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
    // A run at work (its step registers the wait before the commit parks it): a delivery goes to its wait.
    await h.ctx.redis.hset(h.ctx.keys.run(runId).run, 'status', 'running');
    const waitId = waitIdOf(runId, { step: 1, callId: 'call_1_0' });
    const reg = await store.awaitEvent({
      tenant: 'acme',
      agent: 'support',
      key: 'reply:P-1',
      waitId,
      at: now + HOUR,
      now,
      runId,
    });
    expect(reg.kind).toBe('waiting');
    // The delivery comes before the wake job exists: nothing to promote yet.
    const r = await deliver(h.ctx, { tenant: 'acme', agent: 'support', key: 'reply:P-1', payload: { ok: true } }, now);
    expect(r).toMatchObject({ kind: 'resumed', runId, waitId });
    const data = { v: 1 as const, runId, step: 2, used: { steps: 1, tokens: 0 }, wake: true };
    await store.addWakeJob(data, now + HOUR, { tenant: 'acme', agent: 'support', key: 'reply:P-1', waitId });
    const queue = h.ctx.queues.forRun(runId);
    expect(await (await queue.getJob(stepJobId(runId, 2)))!.getState()).toBe('waiting');

    const other = 'r_0123456789abcdef01234568';
    const otherWait = waitIdOf(other, { step: 1, callId: 'call_1_0' });
    await store.awaitEvent({
      tenant: 'acme',
      agent: 'support',
      key: 'reply:P-2',
      waitId: otherWait,
      at: now + HOUR,
      now,
      runId: other,
    });
    await store.addWakeJob({ ...data, runId: other }, now + HOUR, {
      tenant: 'acme',
      agent: 'support',
      key: 'reply:P-2',
      waitId: otherWait,
    });
    expect(await (await h.ctx.queues.forRun(other).getJob(stepJobId(other, 2)))!.getState()).toBe('delayed');
  });

  it("after its worker died between the park and the job's add, the sweep's re-add is due at once", async () => {
    const worker = await spawnWorker({ ...h.env, CRASH_POINTS: 'after_commit@1' });
    const usage = { promptTokens: 10, completionTokens: 5 };
    const base = { usage, transientFailures: 0 };
    const script = [
      { toolCalls: [{ name: 'wait_for_reply', args: { hours: 1 } }], ...base },
      { toolCalls: [], final: 'done', ...base },
    ];
    const ticket = sampleTicket('P-3');
    const spec = buildSpec(h.ctx, { tenant: 'acme', ticket, agent: { model: 'scripted', script } }, Date.now());
    await h.ctx.store.create(spec, Date.now());
    expect((await worker.exited).signal).toBe('SIGKILL');
    expect(await h.ctx.redis.hget(h.ctx.keys.run(spec.runId).run, 'status')).toBe('waiting_event');
    const queue = h.ctx.queues.forRun(spec.runId);
    expect(await queue.getJob(stepJobId(spec.runId, 2))).toBeUndefined();
    const r = await deliver(h.ctx, {
      tenant: 'acme',
      agent: 'support',
      key: replyKey(ticket.id),
      payload: { message: 'M' },
    });
    expect(r).toMatchObject({ kind: 'resumed', runId: spec.runId });
    await h.ctx.store.ensureCurrentStepJob(spec.runId);
    expect(await (await queue.getJob(stepJobId(spec.runId, 2)))!.getState()).toBe('waiting');
  }, 60_000);
});
