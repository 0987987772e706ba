/**
 * The load stage without Redis: job data validated, unknown runs dropped, stale redeliveries refused, journalled
 * decisions found.
 */
import { describe, expect, it } from 'vitest';
import { InvalidStepInput } from '../../../src/core/errors.js';
import { load } from '../../../src/worker/step/load.js';
import { MemoryJob } from './memoryStepStore.js';
import { delivery, jobData, specOf, usage, world } from './fixtures.js';

describe('load', () => {
  it('refuses job data that does not parse, naming the field', async () => {
    const w = world();
    const job = new MemoryJob('x.s1', { v: 1, runId: 'x', step: 0, used: { steps: 0, tokens: 0 } });
    const err = await load(w.env, delivery(job), new WeakMap()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidStepInput);
    expect((err as InvalidStepInput).field).toBe('step');
  });

  it('drops a step of an unknown run', async () => {
    const w = world();
    const spec = specOf();
    expect(
      await load(w.env, delivery(new MemoryJob(`${spec.runId}.s1`, jobData(spec))), new WeakMap()),
    ).toBeUndefined();
  });

  it('a first delivery trusts the usage its job carries and reads no state', async () => {
    const w = world();
    const spec = specOf();
    w.store.addRun(spec).state.used = { steps: 99, tokens: 99, contextBytes: 99 };
    const data = jobData(spec, 1, { used: { steps: 0, tokens: 7, contextBytes: 3 } });
    const state = await load(w.env, delivery(new MemoryJob(`${spec.runId}.s1`, data)), new WeakMap());
    expect(state?.redelivered).toBe(false);
    expect(state?.used).toEqual({ steps: 0, tokens: 7, contextBytes: 3 });
    expect(state?.decision).toBeUndefined();
  });

  it('a redelivery of a job whose step was committed is stale: refused, counted, the current job ensured', async () => {
    const w = world();
    const spec = specOf();
    const run = w.store.addRun(spec);
    run.state.cursor = 2;
    run.state.jobId = `${spec.runId}.s2`;
    const job = new MemoryJob(`${spec.runId}.s1`, jobData(spec), 'token-A', 2);
    expect(await load(w.env, delivery(job), new WeakMap())).toBeUndefined();
    expect(w.store.ensured).toEqual([spec.runId]);
    const rejections = await w.env.metrics.fenceRejections.get();
    expect(rejections.values.find((v) => v.labels.code === 'stale_step')?.value).toBe(1);
  });

  it('a redelivery reads the usage from the run and finds the decision an earlier delivery journalled', async () => {
    const w = world();
    const spec = specOf();
    const run = w.store.addRun(spec);
    const decision = {
      v: 1 as const,
      kind: 'decision' as const,
      step: 1,
      model: 'queued',
      toolCalls: [],
      final: 'x',
      usage,
      attempts: 1,
    };
    run.journal.push(decision);
    run.state.decidedStep = 1;
    run.state.used = { steps: 0, tokens: 12, contextBytes: 40 };
    const job = new MemoryJob(`${spec.runId}.s1`, jobData(spec), 'token-A', 2);
    const state = await load(w.env, delivery(job), new WeakMap());
    expect(state?.redelivered).toBe(true);
    expect(state?.used).toEqual({ steps: 0, tokens: 12, contextBytes: 40 });
    expect(state?.decision).toEqual(decision);
  });

  it("limits an operator's retry set replace the spec's, one derived spec per (spec, limits)", async () => {
    const w = world();
    const spec = specOf();
    w.store.addRun(spec);
    const limits = { ...spec.limits, maxSteps: 50 };
    const limited = new WeakMap();
    const first = await load(w.env, delivery(new MemoryJob(`${spec.runId}.s1`, jobData(spec, 1, { limits }))), limited);
    const again = await load(w.env, delivery(new MemoryJob(`${spec.runId}.s1`, jobData(spec, 1, { limits }))), limited);
    expect(first?.spec.limits.maxSteps).toBe(50);
    expect(again?.spec).toBe(first?.spec);
  });
});
