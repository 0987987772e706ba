/** The commit stage without Redis: the plan as one record, the fence, and the crash points around the write. */
import { describe, expect, it } from 'vitest';
import { FenceError } from '../../../src/core/errors.js';
import { commit, commitRecord } from '../../../src/worker/step/commit.js';
import { stopPlan, type CommitPlan } from '../../../src/worker/step/state.js';
import { MemoryJob } from './memoryStepStore.js';
import { jobData, specOf, stateOf, world } from './fixtures.js';

const spec = specOf();
const advance: CommitPlan = {
  entries: [{ v: 1, kind: 'observation', step: 1, callId: 'c', tool: 'read_note', status: 'ok', output: { n: 1 } }],
  carriesDecision: false,
  status: 'running',
  reason: '',
  stepsDelta: 1,
  tokensDelta: 5,
  advance: true,
};

describe('commit', () => {
  it("builds one record: entries encoded, the transcript's growth, and the next step's job with the usage after it", () => {
    const w = world();
    const limits = { ...spec.limits, maxSteps: 40 };
    const state = stateOf(spec, new MemoryJob(`${spec.runId}.s1`, jobData(spec, 1, { limits })), {
      used: { steps: 3, tokens: 100, contextBytes: 10 },
    });
    const record = commitRecord(w.env, state, advance, true);
    const bytes = Buffer.byteLength(record.encoded[0]!);
    expect(record.contextBytesDelta).toBe(bytes);
    expect(record.next).toEqual({
      v: 1,
      runId: spec.runId,
      step: 2,
      used: { steps: 4, tokens: 105, contextBytes: 10 + bytes },
      limits,
    });
    expect(record.fetchNext).toBe(true);
    expect(record.startedEvent).toBe(state.startedEvent);
  });

  it('a stop adds no next job; a run without a byte count keeps none', () => {
    const w = world();
    const state = stateOf(spec, new MemoryJob(`${spec.runId}.s1`, jobData(spec)), {
      used: { steps: 0, tokens: 0 },
      startedEmitted: true,
    });
    const record = commitRecord(w.env, state, stopPlan(1, { status: 'failed', reason: 'x' }), false);
    expect(record.next).toBeUndefined();
    expect(record.contextBytesDelta).toBeUndefined();
    expect(record.startedEvent).toBe('');
  });

  it('writes the plan, completes the job and counts the step', async () => {
    const w = world();
    w.store.addRun(spec);
    const job = new MemoryJob(`${spec.runId}.s1`, jobData(spec));
    await commit(w.env, stateOf(spec, job), advance, false);
    const run = w.store.run(spec.runId);
    expect(run.state).toMatchObject({ cursor: 2, status: 'running', jobId: `${spec.runId}.s2` });
    expect(w.store.added.map((d) => d.step)).toEqual([2]);
    expect(job.completed).toBe(true);
    expect((await w.env.metrics.stepsCommitted.get()).values[0]?.value).toBe(1);
  });

  it('a death at before_commit writes nothing; at after_commit the step is wholly committed', async () => {
    for (const [point, journalled] of [
      ['before_commit', 0],
      ['after_commit', 1],
    ] as const) {
      const w = world({ crash: [point] });
      w.store.addRun(spec);
      const job = new MemoryJob(`${spec.runId}.s1`, jobData(spec));
      await expect(commit(w.env, stateOf(spec, job), advance, false)).rejects.toThrow('killed');
      expect(w.store.run(spec.runId).journal).toHaveLength(journalled);
    }
  });

  it('a job whose lock moved is refused by the fence and writes nothing', async () => {
    const w = world();
    w.store.addRun(spec, 'token-B');
    const job = new MemoryJob(`${spec.runId}.s1`, jobData(spec), 'token-A');
    const err = await commit(w.env, stateOf(spec, job), advance, false).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FenceError);
    expect((err as FenceError).code).toBe('lock_lost');
    expect(w.store.run(spec.runId).journal).toHaveLength(0);
  });

  it('a run that stops gives its flow-control slot back; one that goes on keeps it', async () => {
    const released: string[] = [];
    for (const plan of [advance, stopPlan(1, { status: 'needs_human', reason: 'x' })]) {
      const w = world();
      w.env = { ...w.env, admission: { release: async (runId) => void released.push(`${runId}:${plan.status}`) } };
      w.store.addRun(spec);
      await commit(w.env, stateOf(spec, new MemoryJob(`${spec.runId}.s1`, jobData(spec))), plan, false);
    }
    expect(released).toEqual([`${spec.runId}:needs_human`]);
  });

  it('a run that stops lets go of its cached spec and transcript; one that goes on keeps them', async () => {
    const forgotten: string[][] = [];
    for (const plan of [advance, stopPlan(1, { status: 'completed', reason: 'final_answer' })]) {
      const w = world();
      w.store.addRun(spec);
      await commit(w.env, stateOf(spec, new MemoryJob(`${spec.runId}.s1`, jobData(spec))), plan, false);
      forgotten.push(w.store.forgotten);
    }
    expect(forgotten).toEqual([[], [`transcript:${spec.runId}`, `spec:${spec.runId}`]]);
  });

  it('a recorded cancel wins over the plan: the run ends cancelled and is counted so', async () => {
    const w = world();
    w.store.addRun(spec).state.cancelRequested = true;
    await commit(w.env, stateOf(spec, new MemoryJob(`${spec.runId}.s1`, jobData(spec))), advance, false);
    expect(w.store.run(spec.runId).state.status).toBe('cancelled');
    const finished = await w.env.metrics.runsFinished.get();
    expect(finished.values[0]?.labels).toMatchObject({ status: 'cancelled', reason: 'cancelled_by_operator' });
  });
});
