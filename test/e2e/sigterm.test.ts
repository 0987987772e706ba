/**
 * SIGTERM handoff of a real worker process: the held step is handed back at
 * once (moveToWait + WaitingError) and finished by another worker; /readyz
 * turns 503; a write dispatch already in flight finishes and is recorded
 * `confirmed` inside the grace period.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { spawnWorker } from '../../testkit/processes.js';
import { buildSpec } from '../../src/producer/intake.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { freePort } from '../../testkit/embeddedRedis.js';
import { until } from '../../testkit/until.js';

const GRACE_MS = 10_000;
let h: Harness;
beforeEach(async () => {
  h = await createHarness('sigterm');
});
afterEach(async () => {
  await h.close();
});

async function createSupportRun(id: string): Promise<string> {
  const spec = buildSpec(h.ctx, { tenant: 'acme', ticket: sampleTicket(id), budget: { maxSteps: 25 } }, Date.now());
  await h.ctx.store.create(spec, Date.now());
  return spec.runId;
}

const procEnv = (port: number) => ({
  ...h.env,
  WORKER_METRICS_PORT: String(port),
  SHUTDOWN_GRACE_MS: String(GRACE_MS),
  LOCK_DURATION_MS: '1000',
  STALLED_INTERVAL_MS: '500',
});

async function readyz(port: number): Promise<number> {
  try {
    return (await fetch(`http://127.0.0.1:${port}/readyz`)).status;
  } catch {
    return -1; // closed
  }
}

async function expectJournalInOrder(runId: string, n: number) {
  const decisions = (await h.ctx.store.transcript(runId)).filter((e) => e.kind === 'decision').map((e) => e.step);
  expect(decisions).toEqual(Array.from({ length: n }, (_, i) => i + 1));
}

/** Waits until the run's email is `dispatched` (the request has left), and returns the ledger. */
async function emailDispatched(runId: string): Promise<Ledger> {
  const ledger = new Ledger(h.ctx.redis, h.ctx.keys);
  await until('email dispatched', 20_000, async () =>
    (await ledger.listForRun(runId)).some((a) => a.tool === 'send_email' && a.state === 'dispatched'),
  );
  return ledger;
}

/** Faults off, a fresh worker finishes the run: one ticket, one email, no duplicate, steps 1-5 once each. */
async function finishOnAnotherWorker(runId: string) {
  h.sandbox.clearFaults();
  await h.startWorker();
  expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'], 20_000)).toBe('completed');
  const counts = h.sandbox.counts();
  expect(counts.byResource.tickets.records).toBe(1);
  expect(counts.byResource.emails.records).toBe(1);
  expect(counts.duplicates).toBe(0);
  await expectJournalInOrder(runId, 5);
}

describe('SIGTERM handoff of a real worker process', () => {
  it('hands a slow read step back at once, exits 0 well below the grace, and another worker finishes the run', async () => {
    h.sandbox.setFaults([{ kind: 'slow_commit', resource: 'kb', ms: 3000 }]);
    const port = await freePort();
    const runId = await createSupportRun('S-1');
    const proc = await spawnWorker(procEnv(port));
    expect(await readyz(port)).toBe(200);
    // Step 2 reads the customer and the knowledge base at once: the worker holds the step while the kb read hangs 3 s.
    await until('step 2', 20_000, async () => (await h.ctx.store.readState(runId))?.cursor === 2);
    await until('the kb read held at the sandbox', 20_000, () => h.sandbox.held() === 1);
    const sentAt = Date.now();
    proc.child.kill('SIGTERM');
    const exit = await proc.exited;
    const tookMs = Date.now() - sentAt;
    expect(exit).toMatchObject({ code: 0, signal: null });
    expect(tookMs).toBeLessThan(2500); // the 3 s read was aborted, not waited for; grace is 10 s
    expect(proc.lines.some((l) => l.includes('"sigterm_handoff"'))).toBe(true);
    // Handed back to the wait list (not stalled): a fresh worker takes it right away.
    await finishOnAnotherWorker(runId);
  });

  it('a dispatch in flight at SIGTERM finishes and is recorded confirmed within the grace; /readyz turns 503', async () => {
    h.sandbox.setFaults([{ kind: 'slow_commit', resource: 'emails', ms: 1000 }]);
    const port = await freePort();
    const runId = await createSupportRun('S-2');
    const proc = await spawnWorker(procEnv(port));
    expect(await readyz(port)).toBe(200);
    const ledger = await emailDispatched(runId);
    const sentAt = Date.now();
    proc.child.kill('SIGTERM');
    // Unready while the dispatch finishes inside the grace.
    const status = await until('readyz 503', 5000, async () => {
      const s = await readyz(port);
      return s === 503 ? s : undefined;
    });
    expect(status).toBe(503);
    const exit = await proc.exited;
    expect(exit).toMatchObject({ code: 0, signal: null });
    expect(Date.now() - sentAt).toBeLessThan(GRACE_MS);
    const email = (await ledger.listForRun(runId)).find((a) => a.tool === 'send_email')!;
    expect(email.state).toBe('confirmed');
    expect(email.history.map((x) => x.to)).not.toContain('outcome_unknown');
    expect(h.sandbox.counts().byResource.emails.records).toBe(1);
    await finishOnAnotherWorker(runId);
  });

  for (const how of ['grace period ends', 'second SIGTERM'] as const) {
    it(`a dispatch still in flight when the ${how} is cut off, never resent blindly: the next owner reconciles it, one email`, async () => {
      h.sandbox.setFaults([{ kind: 'slow_commit', resource: 'emails', ms: 4000 }]);
      const port = await freePort();
      const runId = await createSupportRun(`S-${how === 'second SIGTERM' ? 4 : 3}`);
      const proc = await spawnWorker({
        ...procEnv(port),
        SHUTDOWN_GRACE_MS: how === 'second SIGTERM' ? String(GRACE_MS) : '800',
      });
      const ledger = await emailDispatched(runId);
      const sentAt = Date.now();
      proc.child.kill('SIGTERM');
      if (how === 'second SIGTERM') {
        await new Promise((r) => setTimeout(r, 1200)); // an echo within 1 s is ignored
        proc.child.kill('SIGTERM');
      }
      const exit = await proc.exited;
      expect(exit.code).toBe(how === 'second SIGTERM' ? 1 : 0);
      expect(Date.now() - sentAt).toBeLessThan(3500); // well before the 4 s send would have answered
      const email = (await ledger.listForRun(runId)).find((a) => a.tool === 'send_email')!;
      // At the end of the grace the process cuts the request and records that it cannot know
      // the outcome; a second SIGTERM exits at once and leaves the entry dispatched.
      expect(email.state).toBe(how === 'second SIGTERM' ? 'dispatched' : 'outcome_unknown');
      await finishOnAnotherWorker(runId);
      const after = (await ledger.listForRun(runId)).find((a) => a.tool === 'send_email')!;
      expect(after.history.map((x) => x.to)).toContain('outcome_unknown');
      expect(after.state).toBe('confirmed');
    });
  }
});
