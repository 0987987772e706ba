/**
 * A delivery after lost ones (the job's stalls) charges each lost delivery one attempt's estimate before its
 * pre-flight; a job that never stalled makes no such call.
 */
import { describe, expect, it } from 'vitest';
import { MemoryJob } from './memoryStepStore.js';
import { delivery, finalTurn, jobData, options, specOf, world } from './fixtures.js';

describe('lost deliveries', () => {
  it('each stall of the job is charged one estimate, seen by the pre-flight', async () => {
    const w = world({ turns: [finalTurn] });
    const spec = specOf();
    w.store.addRun(spec);
    const job = new MemoryJob(`${spec.runId}.s1`, jobData(spec), 'token-A', 3, 0, 3, 2);
    await w.pipeline.run(delivery(job));
    expect(w.store.charged).toHaveLength(1);
    const per = w.store.charged[0]!.tokens / 2;
    expect(per).toBeGreaterThan(options.COMPLETION_TOKEN_CAP);
    const run = w.store.run(spec.runId);
    expect(run.state).toMatchObject({ status: 'completed' });
    expect(run.state.used.tokens).toBe(2 * per + 12);
  });

  it('the pre-flight stops the run when the lost deliveries used its tokens up', async () => {
    const w = world({ turns: [finalTurn] });
    const probe = world({ turns: [finalTurn] });
    const probeSpec = specOf();
    probe.store.addRun(probeSpec);
    await probe.pipeline.run(
      delivery(new MemoryJob(`${probeSpec.runId}.s1`, jobData(probeSpec), 'token-A', 3, 0, 3, 1)),
    );
    const per = probe.store.charged[0]!.tokens;
    const spec = specOf();
    spec.limits = { ...spec.limits, maxTokens: 2 * per + per / 2 };
    w.store.addRun(spec);
    await w.pipeline.run(delivery(new MemoryJob(`${spec.runId}.s1`, jobData(spec), 'token-A', 3, 0, 3, 2)));
    const run = w.store.run(spec.runId);
    expect(run.state.status).toBe('budget_exceeded');
    expect(run.state.used.tokens).toBe(2 * per);
  });

  it('no stall: no charge and no store call', async () => {
    const w = world({ turns: [finalTurn] });
    const spec = specOf();
    w.store.addRun(spec);
    await w.pipeline.run(delivery(new MemoryJob(`${spec.runId}.s1`, jobData(spec), 'token-A', 2, 0, 3, 0)));
    expect(w.store.charged).toEqual([]);
  });
});
