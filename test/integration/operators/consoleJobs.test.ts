/** The console's job list of a run, from its step_started events: the latest first, packed entries expanded. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from '../../../testkit/harness.js';
import { runJobs } from '../../../src/http/console/jobs.js';

let h: Harness;
beforeAll(async () => {
  h = await createHarness('consolejobs');
});
afterAll(async () => {
  await h.close();
});

describe('console job list', () => {
  it('names every step job, the latest first, whether its step_started shares an entry or not', async () => {
    const runId = `r_${'d'.repeat(24)}`;
    const stream = h.ctx.keys.run(runId).events;
    const started = (step: number) => JSON.stringify({ step, jobId: `job-${step}`, attempt: 1 });
    await h.ctx.redis.xadd(stream, '*', 'type', 'run_created', 'data', '{}');
    await h.ctx.redis.xadd(stream, '*', 'type', 'step_started', 'data', started(0));
    // A commit's entry: step_started, decision, step_committed.
    await h.ctx.redis.xadd(
      stream,
      '*',
      'type',
      'step_started',
      'data',
      started(1),
      'type',
      'decision',
      'data',
      '{}',
      'type',
      'step_committed',
      'data',
      '{}',
    );
    // journalDecision's entry, then the commit's.
    await h.ctx.redis.xadd(stream, '*', 'type', 'step_started', 'data', started(2), 'type', 'decision', 'data', '{}');
    await h.ctx.redis.xadd(stream, '*', 'type', 'step_committed', 'data', '{}', 'type', 'status_changed', 'data', '{}');
    const jobs = await runJobs(h.ctx, runId, '');
    expect(jobs.map((j) => [j.jobId, j.step])).toEqual([
      ['job-2', 2],
      ['job-1', 1],
      ['job-0', 0],
    ]);
  });
});
