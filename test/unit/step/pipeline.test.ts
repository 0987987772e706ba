/**
 * The stages run in order by the pipeline, without Redis: a run to its end, a duplicate delivery, a failing step's last
 * attempt.
 */
import { DelayedError } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { NotReplicatedError } from '../../../src/store/replicated.js';
import { ScriptedProvider } from '../../../src/models/scripted.js';
import { MemoryJob } from './memoryStepStore.js';
import { delivery, finalTurn, jobData, readTurn, specOf, world, writeTurn, type World } from './fixtures.js';

/** Delivers the run's current step job, as BullMQ would after each commit. */
async function deliverCurrent(w: World, runId: string, token = 'token-A', attemptsStarted = 1): Promise<MemoryJob> {
  const run = w.store.run(runId);
  const data = w.store.added.at(-1) ?? jobData(run.spec);
  const job = new MemoryJob(run.state.jobId, data, token, attemptsStarted);
  await w.pipeline.run(delivery(job));
  return job;
}

describe('step pipeline', () => {
  it('runs a read step then a final step: the journal in order, the budget, the run completed', async () => {
    const w = world({ turns: [readTurn('a'), finalTurn] });
    const spec = specOf();
    w.store.addRun(spec);
    await deliverCurrent(w, spec.runId);
    await deliverCurrent(w, spec.runId);
    const run = w.store.run(spec.runId);
    expect(run.journal.map((e) => `${e.kind}:${e.step}`)).toEqual([
      'decision:1',
      'observation:1',
      'decision:2',
      'status:2',
    ]);
    expect(run.state).toMatchObject({ status: 'completed', cursor: 2 });
    expect(run.state.used).toMatchObject({ steps: 2, tokens: 24 });
    expect(run.events.filter((e) => e.type === 'step_started')).toHaveLength(2);
  });

  it("a scripted branching turn is given the transcript and plays the branch the last step's results select", async () => {
    const w = world();
    (w.env.providers as Map<string, ScriptedProvider>).set('scripted', new ScriptedProvider());
    const usage = { promptTokens: 1, completionTokens: 1 };
    const script = [
      { toolCalls: [{ name: 'read_note', args: { id: 'a' } }], usage },
      {
        branches: [
          { whenLastToolResult: { contains: 'note b' }, final: 'read b', usage },
          { whenLastToolResult: { contains: 'note a' }, final: 'read a', usage },
        ],
      },
    ];
    const spec = specOf({ model: 'scripted', script });
    w.store.addRun(spec);
    await deliverCurrent(w, spec.runId);
    await deliverCurrent(w, spec.runId);
    const run = w.store.run(spec.runId);
    expect(run.state).toMatchObject({ status: 'completed' });
    expect(run.journal.find((e) => e.kind === 'decision' && e.step === 2)).toMatchObject({ final: 'read a' });
  });

  it('the same job delivered again after its commit changes nothing and only ensures the current job', async () => {
    const w = world({ turns: [readTurn('a'), readTurn('b')] });
    const spec = specOf();
    w.store.addRun(spec);
    const first = await deliverCurrent(w, spec.runId);
    const journal = w.store.run(spec.runId).journal.length;
    await w.pipeline.run(delivery(new MemoryJob(first.id, first.data, 'token-A', 2)));
    expect(w.store.run(spec.runId).journal).toHaveLength(journal);
    expect(w.store.ensured).toEqual([spec.runId]);
    expect(w.model.requests).toHaveLength(1);
  });

  it('a delivery whose lock moved commits nothing; the model was asked once, by it', async () => {
    const w = world({ turns: [readTurn('a')] });
    const spec = specOf();
    w.store.addRun(spec, 'token-B');
    await deliverCurrent(w, spec.runId, 'token-A');
    expect(w.store.run(spec.runId).journal).toHaveLength(0);
    const rejections = await w.env.metrics.fenceRejections.get();
    expect(rejections.values.find((v) => v.labels.code === 'lock_lost')?.value).toBe(1);
  });

  it('an error is rethrown before the last attempt (BullMQ retries); on the last, the run ends failed with its code', async () => {
    const leak = () => new TypeError('customer text here');
    const w = world({ turns: [writeTurn, writeTurn], effects: [leak(), leak()] });
    const spec = specOf();
    w.store.addRun(spec);
    const first = new MemoryJob(`${spec.runId}.s1`, jobData(spec), 'token-A', 1, 0, 2);
    await expect(w.pipeline.run(delivery(first))).rejects.toThrow('customer text here');
    expect(w.store.run(spec.runId).state.status).toBe('running');
    const last = new MemoryJob(`${spec.runId}.s1`, jobData(spec), 'token-A', 2, 1, 2);
    await w.pipeline.run(delivery(last));
    const run = w.store.run(spec.runId);
    expect(run.state.status).toBe('failed');
    expect(run.state.reason).toBe('step_error: TypeError');
    expect(JSON.stringify(run.journal)).not.toContain('customer text');
    // The redelivery reused the decision the first delivery journalled before its write.
    expect(w.model.requests).toHaveLength(1);
  });

  it('replicas behind before a dispatch: the job waits their Retry-After, no attempt spent, nothing committed', async () => {
    const w = world({ turns: [writeTurn], effects: [new NotReplicatedError(0, 1, 250)] });
    const spec = specOf();
    w.store.addRun(spec);
    const job = new MemoryJob(`${spec.runId}.s1`, jobData(spec), 'token-A', 1, 0, 1);
    await expect(w.pipeline.run(delivery(job))).rejects.toBeInstanceOf(DelayedError);
    expect(job.delayedUntil).toBe(w.clock.now + 250);
    expect(w.store.run(spec.runId).state.status).toBe('running');
  });
});
