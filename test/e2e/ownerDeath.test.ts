/**
 * Notice death, not silence (src/worker/ownerWatch.ts), with real processes,
 * real signals and a real `CLIENT KILL`. The step in the middle of each run is
 * an email whose commit the sandbox holds, so the victim is mid-step (the email
 * `dispatched`) when it is hit. Each case checks one email, each step committed
 * once (one decision and one observation per step, steps used = 3).
 *
 *  - SIGKILL: the lock is 60 s, so only the owner watch (the connection
 *    vanished) can hand the step to the other worker before it.
 *  - an event loop blocked 5 s, lock 20 s (the default): the connection stays
 *    open, nothing moves, the step is delivered once.
 *  - CLIENT KILL of a live worker's connection: its jobs move like a false
 *    stall; the fence and the ledger keep the step once.
 *  - SIGSTOP: the connection stays open, the watch leaves it; BullMQ's stall
 *    check moves it once the lock expires; SIGCONT: the woken delivery cannot
 *    commit (fence) and sends nothing again (ledger).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { spawnWorker, type WorkerProcess } from '../../testkit/processes.js';
import { buildSpec } from '../../src/producer/intake.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { ownerOfToken } from '../../src/store/bullmqInternals.js';
import { parseOwner } from '../../src/store/owners.js';
import { stepJobId } from '../../src/store/keys.js';
import type { Script } from '../../src/models/scriptedTurns.js';
import { read, final, email } from '../../testkit/turns.js';
import { readRunEvents } from '../../testkit/runEvents.js';
import { until } from '../../testkit/until.js';

let h: Harness;
const victims: WorkerProcess[] = [];
beforeEach(async () => {
  h = await createHarness('ownerdeath', {
    RECONCILER_MIN_AGE_MS: '0',
    RECONCILE_DEADLINE_MS: '15000',
    RECONCILE_POLL_MS: '50',
  });
});
afterEach(async () => {
  for (const v of victims.splice(0)) {
    if (v.child.exitCode === null && v.child.signalCode === null) {
      v.child.kill('SIGCONT');
      v.child.kill('SIGKILL');
      await v.exited;
    }
  }
  await h.close();
});

async function createRun(id: string): Promise<string> {
  const spec = buildSpec(
    h.ctx,
    {
      tenant: 'acme',
      ticket: sampleTicket(id),
      budget: { maxSteps: 10 },
      agent: { model: 'scripted', script: [read, email, final] as Script },
    },
    Date.now(),
  );
  await h.ctx.store.create(spec, Date.now());
  return spec.runId;
}

/** Starts a victim process and waits until its step 2 email is `dispatched` (the sandbox holds the commit `holdMs`). */
async function victimMidEmail(runId: string, env: Record<string, string>, holdMs: number): Promise<WorkerProcess> {
  h.sandbox.setFaults([{ kind: 'slow_commit', resource: 'emails', ms: holdMs, count: 1 }]);
  const victim = await spawnWorker({ ...h.env, ...env });
  victims.push(victim);
  const ledger = new Ledger(h.ctx.redis, h.ctx.keys);
  await until(
    'step 2 dispatching its email',
    20_000,
    async () => (await ledger.listForRun(runId))[0]?.state === 'dispatched',
  ).catch((err: Error) => {
    throw new Error(`${err.message}:\n${victim.lines.join('\n')}`);
  });
  return victim;
}

/** One email, each step decided and observed once, three steps used, completed. */
async function expectOnce(runId: string): Promise<void> {
  const counts = h.sandbox.counts();
  expect(counts.byResource.emails.records).toBe(1);
  expect(counts.duplicates).toBe(0);
  const transcript = await h.ctx.store.transcript(runId);
  expect(transcript.filter((e) => e.kind === 'decision').map((e) => e.step)).toEqual([1, 2, 3]);
  expect(transcript.filter((e) => e.kind === 'observation').map((e) => e.step)).toEqual([1, 2]); // the final step observes nothing
  const state = await h.ctx.store.readState(runId);
  expect(state?.status).toBe('completed');
  expect(state?.used.steps).toBe(3);
  const [action] = await new Ledger(h.ctx.redis, h.ctx.keys).listForRun(runId);
  expect(action?.state).toBe('confirmed');
}

/** step_started events of one step in the run's stream: one per delivery that reached its first script. */
async function deliveriesOf(runId: string, step: number): Promise<number> {
  return (await readRunEvents(h.ctx, runId)).filter(
    (e) => e.type === 'step_started' && (JSON.parse(e.data) as { step: number }).step === step,
  ).length;
}

const requeues = async () => (await h.ctx.metrics.deadOwnerRequeues.get()).values[0]?.value ?? 0;

describe('owner watch with real processes', () => {
  it('SIGKILL mid-step (lock 60 s): the other worker takes the step from the vanished connection; one email, one commit per step', async () => {
    const runId = await createRun('OD-kill');
    const victim = await victimMidEmail(runId, { LOCK_DURATION_MS: '60000', STALLED_INTERVAL_MS: '30000' }, 1500);
    await h.startWorker();
    victim.child.kill('SIGKILL');
    expect((await victim.exited).signal).toBe('SIGKILL');
    // Well inside the 60 s lock: only the owner watch could have moved the step.
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'], 30_000)).toBe('completed');
    expect(await requeues()).toBeGreaterThanOrEqual(1);
    await expectOnce(runId);
  });

  it('an event loop blocked 5 s mid-step (lock 20 s): no second delivery, one email, one commit per step', async () => {
    const runId = await createRun('OD-block');
    h.sandbox.setFaults([]);
    const victim = await spawnWorker({
      ...h.env,
      LOCK_DURATION_MS: '20000',
      STALLED_INTERVAL_MS: '5000',
      PAUSE_POINTS: 'after_dispatched@2=5000',
    });
    victims.push(victim);
    const ledger = new Ledger(h.ctx.redis, h.ctx.keys);
    await until('step 2 planning its email', 20_000, async () => (await ledger.listForRun(runId)).length > 0);
    // Another worker (with its own watch) runs through the whole freeze.
    await h.startWorker();
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'], 30_000)).toBe('completed');
    expect(await deliveriesOf(runId, 2)).toBe(1);
    expect(await requeues()).toBe(0);
    expect((await h.ctx.metrics.stallRecoveries.get()).values[0]?.value ?? 0).toBe(0);
    expect(victim.lines.some((l) => l.includes('"code":"lock_lost"') || l.includes('"code":"stale_step"'))).toBe(false);
    await expectOnce(runId);
  });

  it("CLIENT KILL of a live worker's connection mid-step: its jobs move, the step completes once, one email", async () => {
    const runId = await createRun('OD-clientkill');
    const victim = await victimMidEmail(runId, { LOCK_DURATION_MS: '60000', STALLED_INTERVAL_MS: '30000' }, 1500);
    await h.startWorker();
    const lockKey = h.ctx.keys.jobLock(h.ctx.keys.shardOf(runId), stepJobId(runId, 2));
    const clientId = parseOwner(ownerOfToken((await h.ctx.redis.get(lockKey))!) ?? '')?.clientId;
    expect(clientId).toBeDefined();
    await h.ctx.redis.client('KILL', 'ID', clientId!);
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'], 30_000)).toBe('completed');
    // The process lived on: it reconnected under a new client id and said so.
    await until('the victim reporting its new connection', 15_000, () =>
      victim.lines.some((l) => l.includes('"code":"owner_connection_changed"')),
    );
    expect(victim.child.exitCode).toBeNull();
    // The step moved (a watcher, this one or the victim's own once reconnected, requeued it) and was delivered again.
    expect(await deliveriesOf(runId, 2)).toBeGreaterThanOrEqual(2);
    await expectOnce(runId);
    victim.child.kill('SIGTERM');
    expect((await victim.exited).code).toBe(0);
  });

  it('SIGSTOP mid-step: the watch leaves the open connection alone, the stall check moves the step after the lock; SIGCONT causes no second email or commit', async () => {
    const runId = await createRun('OD-stop');
    const victim = await victimMidEmail(runId, { LOCK_DURATION_MS: '3000', STALLED_INTERVAL_MS: '1000' }, 1500);
    victim.child.kill('SIGSTOP');
    await h.startWorker();
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'], 30_000)).toBe('completed');
    expect(await requeues()).toBe(0);
    victim.child.kill('SIGCONT');
    // The woken delivery finishes its call and tries to commit: the fence refuses it.
    await until('the woken delivery reaching its fence', 15_000, () =>
      victim.lines.some((l) => l.includes('"code":"lock_lost"') || l.includes('"code":"stale_step"')),
    ).catch((err: Error) => {
      throw new Error(`${err.message}:\n${victim.lines.join('\n')}`);
    });
    victim.child.kill('SIGTERM');
    expect((await victim.exited).code).toBe(0);
    await expectOnce(runId);
  });
});
