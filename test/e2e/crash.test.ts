/**
 * Real processes killed with real signals (SIGKILL at named crash points), then
 * recovery by another worker or by the reconciler's sweep.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from '../../testkit/harness.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { Reconciler } from '../../src/ledger/reconciler.js';
import { type ScriptedProvider } from '../../src/models/scripted.js';
import type { Script } from '../../src/models/scriptedTurns.js';
import { read, final, email, ticket } from '../../testkit/turns.js';
import { until } from '../../testkit/until.js';
import { scriptedRun, spawnVictim } from '../support/crashVictim.js';

let h: Harness;
beforeEach(async () => {
  h = await createHarness('crash', {
    RECONCILER_MIN_AGE_MS: '0',
    RECONCILE_DEADLINE_MS: '2000',
    RECONCILE_POLL_MS: '50',
  });
});
afterEach(async () => {
  await h.close();
});

const create = (script: Script, id: string) => scriptedRun(h, id, script, 25);

describe('crash recovery with real SIGKILL', () => {
  it('a crash after the decision is journalled resumes without a second model call', async () => {
    const runId = await create([read, email, final], 'C-1');
    const victim = await spawnVictim(h, 'after_decision@2');
    expect((await victim.exited).signal).toBe('SIGKILL');
    const provider = h.ctx.providers.get('scripted') as ScriptedProvider;
    const callsBefore = provider.calls;
    await h.startWorker();
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('completed');
    // Only step 3 was asked of the model here: step 2's decision came from the journal.
    expect(provider.calls - callsBefore).toBe(1);
    const decisions = (await h.ctx.store.transcript(runId)).filter((e) => e.kind === 'decision').map((e) => e.step);
    expect(decisions).toEqual([1, 2, 3]);
    expect(h.sandbox.counts().byResource.emails.records).toBe(1);
  });

  it('a 20-step run evicted at step 12 after a ticket and an email finishes with one of each', async () => {
    const script: Script = [read, read, read, ticket, email, ...Array.from({ length: 14 }, () => read), final];
    const runId = await create(script, 'C-2');
    const victim = await spawnVictim(h, 'before_commit@12');
    expect((await victim.exited).signal).toBe('SIGKILL');
    expect((await h.ctx.store.readState(runId))?.cursor).toBe(12);
    await h.startWorker();
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('completed');
    const counts = h.sandbox.counts();
    expect(counts.byResource.tickets.records).toBe(1);
    expect(counts.byResource.emails.records).toBe(1);
    const decisions = (await h.ctx.store.transcript(runId)).filter((e) => e.kind === 'decision').map((e) => e.step);
    expect(decisions).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect((await h.ctx.store.readState(runId))?.used.steps).toBe(20);
  });

  it('a crash after dispatch and before the outcome is recorded is reconciled by the sweeper, not resent', async () => {
    const runId = await create([read, email, final], 'C-3');
    const victim = await spawnVictim(h, 'after_call@2');
    expect((await victim.exited).signal).toBe('SIGKILL');
    expect(h.sandbox.counts().byResource.emails.records).toBe(1);
    const ledger = new Ledger(h.ctx.redis, h.ctx.keys);
    const [before] = await ledger.listForRun(runId);
    expect(before?.state).toBe('dispatched');
    // Wait for the dead worker's job lock to expire, then sweep.
    const lockKey = h.ctx.keys.jobLock(h.ctx.keys.shardOf(runId), `${runId}.s2`);
    await until("the dead worker's lock lapsed", 30_000, async () => (await h.ctx.redis.exists(lockKey)) === 0, 50);
    const report = await new Reconciler(h.ctx, 'reconciler:test').sweep();
    expect(report.outcomes.confirmed).toBe(1);
    const [after] = await ledger.listForRun(runId);
    expect(after?.state).toBe('confirmed');
    expect(after?.history.map((x) => x.by)).toContain('reconciler:test');
    await h.startWorker();
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('completed');
    expect(h.sandbox.counts().byResource.emails.records).toBe(1);
    expect(h.sandbox.counts().requests).toBeGreaterThan(0);
  });
});
