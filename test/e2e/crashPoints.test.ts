/**
 * Every named crash point in the step and ledger paths, with a real worker
 * process SIGKILLing itself there while step 2 sends an email; another worker
 * then finishes the run. Whatever the instant, the customer gets one email, the
 * journal holds each step once and in order, and the ledger's history says how
 * the action was recovered.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from '../../testkit/harness.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { read, final, email, emailTurn } from '../../testkit/turns.js';
import { DEFLATE_MARKER } from '../../src/core/journal.js';
import { until } from '../../testkit/until.js';
import { scriptedRun, spawnVictim } from '../support/crashVictim.js';

let h: Harness;
beforeEach(async () => {
  h = await createHarness('crashpts', { RECONCILE_DEADLINE_MS: '2000', RECONCILE_POLL_MS: '50' });
});
afterEach(async () => {
  await h.close();
});

const createRun = (id: string, emailTurnOfStep2 = email) => scriptedRun(h, id, [read, emailTurnOfStep2, final]);

async function finishAndCheck(runId: string) {
  await h.startWorker();
  expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human', 'budget_exceeded'])).toBe('completed');
  const counts = h.sandbox.counts();
  expect(counts.byResource.emails.records).toBe(1);
  expect(counts.duplicates).toBe(0);
  const decisions = (await h.ctx.store.transcript(runId)).filter((e) => e.kind === 'decision').map((e) => e.step);
  expect(decisions).toEqual([1, 2, 3]);
  const state = await h.ctx.store.readState(runId);
  expect(state?.used.steps).toBe(3);
  // Each step's model call charged once: the decision of step 2 was never asked again.
  expect(state?.used.tokens).toBe(3 * 15);
  const [action] = await new Ledger(h.ctx.redis, h.ctx.keys).listForRun(runId);
  expect(action?.state).toBe('confirmed');
  return action!;
}

describe('named crash points (real SIGKILL at the instant named)', () => {
  // [point, emails at the service when the process died, states the recovered action passed through]
  const cases: [string, number, string[]][] = [
    ['after_reservation', 0, ['planned', 'authorized', 'dispatched', 'confirmed']],
    // Nothing left before the death: Resend's same-key replay is the one retry (it sends the email once).
    ['after_dispatched', 0, ['dispatched', 'outcome_unknown', 'confirmed']],
    ['after_call', 1, ['dispatched', 'outcome_unknown', 'confirmed']],
    ['after_outcome', 1, ['dispatched', 'confirmed']],
    ['before_commit', 1, ['dispatched', 'confirmed']],
    ['after_commit', 1, ['dispatched', 'confirmed']],
  ];
  for (const [point, sentAtDeath, path] of cases) {
    it(`${point}: one email after recovery`, async () => {
      const runId = await createRun(`CP-${point}`);
      const victim = await spawnVictim(h, `${point}@2`);
      expect((await victim.exited).signal).toBe('SIGKILL');
      expect(h.sandbox.counts().byResource.emails?.records ?? 0).toBe(sentAtDeath);
      const action = await finishAndCheck(runId);
      const visited = action.history.map((x) => x.to);
      for (const s of path) expect(visited).toContain(s);
      expect(visited).not.toContain('safe_retry'); // settled by the service's answer, never resent blindly
      if (visited.includes('outcome_unknown')) expect(action.history.at(-1)?.evidence).toMatchObject({ replay: true });
    });
  }

  it('during_grace: killed inside the SIGTERM grace while a send is in flight; the next owner reconciles it', async () => {
    h.sandbox.setFaults([{ kind: 'slow_commit', resource: 'emails', ms: 1500 }]);
    const runId = await createRun('CP-grace');
    const victim = await spawnVictim(h, 'during_grace', { SHUTDOWN_GRACE_MS: '10000' });
    const ledger = new Ledger(h.ctx.redis, h.ctx.keys);
    const dispatched = async () => (await ledger.listForRun(runId)).some((a) => a.state === 'dispatched');
    await until('the email dispatched', 20_000, dispatched, 10);
    victim.child.kill('SIGTERM');
    expect((await victim.exited).signal).toBe('SIGKILL');
    h.sandbox.clearFaults();
    const action = await finishAndCheck(runId);
    expect(action.history.map((x) => x.to)).toContain('outcome_unknown');
  });

  it('after_decision with the decision stored compressed: the next owner acts on it, never asks the model again', async () => {
    // A long email body makes step 2's decision long enough to be stored deflated (packEntry): its digest, which
    // the ledger's plan and the commit check against the server's copy, is of those bytes.
    const body = Array.from({ length: 12 }, (_, i) => `Paragraph ${i}: your replacement mugs ship tomorrow.`).join(' ');
    const runId = await createRun('CP-packed', emailTurn(body));
    const victim = await spawnVictim(h, 'after_decision@2');
    expect((await victim.exited).signal).toBe('SIGKILL');
    const journal = await h.ctx.redis.lrangeBuffer(h.ctx.keys.run(runId).journal, 0, -1);
    expect(journal.at(-1)?.[0]).toBe(DEFLATE_MARKER);
    const action = await finishAndCheck(runId);
    expect(action.history.map((x) => x.to)).toEqual(['planned', 'authorized', 'dispatched', 'confirmed']);
    expect(h.sandbox.counts().byResource.emails.records).toBe(1);
  });
});
