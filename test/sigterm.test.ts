/**
 * SIGTERM handoff with a real process: the worker stops taking jobs, turns
 * unready, aborts its in-flight read, hands the job back at once and exits 0;
 * another worker finishes the run with each step once and no duplicate effect.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, sampleTicket, type Harness } from './support/harness.js';
import { spawnWorker } from './support/processes.js';
import { buildSpec } from '../src/producer/runs.js';
import { freePort } from '../src/redis/embedded.js';

let h: Harness;
beforeAll(async () => {
  h = await createHarness('sigterm');
});
afterAll(async () => {
  await h.close();
});

describe('SIGTERM', () => {
  it('hands a held step back at once and exits 0; another worker finishes the run', async () => {
    // The knowledge-base search (step 3 of the support agent) hangs for 10 s.
    h.sandbox.setFaults([{ kind: 'slow_commit', resource: 'kb', ms: 10_000 }]);
    const spec = buildSpec(h.ctx, { tenant: 'acme', ticket: sampleTicket('ST-1') }, Date.now());
    const port = await freePort();
    const victim = await spawnWorker({ ...h.env, WORKER_METRICS_PORT: String(port), SHUTDOWN_GRACE_MS: '20000' });
    await h.ctx.store.create(spec, Date.now());
    while ((await h.ctx.store.readState(spec.runId))!.cursor < 3) await new Promise((r) => setTimeout(r, 20));
    await new Promise((r) => setTimeout(r, 200));
    expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);
    const sentAt = Date.now();
    victim.child.kill('SIGTERM');
    const exit = await victim.exited;
    const exitMs = Date.now() - sentAt;
    expect(exit.code).toBe(0);
    // Far below the 10 s the read would have taken and the 20 s grace.
    expect(exitMs).toBeLessThan(5000);
    expect(victim.lines.some((l) => l.includes('"sigterm_handoff"'))).toBe(true);
    // Handed back, not stalled: the job is waiting again, with no attempt counted.
    const job = await h.ctx.queues.forRun(spec.runId).getJob(`${spec.runId}.s3`);
    expect(await job?.getState()).toBe('waiting');
    h.sandbox.clearFaults();
    await h.startWorker();
    expect(await h.waitForStatus(spec.runId, ['completed', 'failed', 'needs_human'])).toBe('completed');
    const decisions = (await h.ctx.store.transcript(spec.runId)).filter((e) => e.kind === 'decision').map((e) => e.step);
    expect(decisions).toEqual([1, 2, 3, 4, 5, 6]);
    expect(h.sandbox.counts().byResource.tickets!.records).toBe(1);
    expect(h.sandbox.counts().byResource.emails!.records).toBe(1);
  });

  it('readiness turns false at the first signal, before the jobs are handed back', async () => {
    const w = await h.startWorker();
    expect(w.ready).toBe(true);
    const stopping = w.stop();
    expect(w.ready).toBe(false);
    await stopping;
  });
});
