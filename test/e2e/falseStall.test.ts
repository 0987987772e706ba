/**
 * A false stall with a real process: the worker's event loop blocks (PAUSE_POINTS)
 * longer than its lock, so the stall check delivers the step again (to the other
 * worker, or to this one once it wakes) while the first delivery still runs. Correctness rests on the ledger's CAS, the key
 * the service enforces and the commit's fence, never on the lock: one email, one
 * commit per step.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { spawnWorker } from '../../testkit/processes.js';
import { buildSpec } from '../../src/producer/intake.js';
import { Ledger } from '../../src/ledger/ledger.js';
import type { Script } from '../../src/models/scriptedTurns.js';
import { read, final, email } from '../../testkit/turns.js';
import { until } from '../../testkit/until.js';

// Short locks on both sides, so a 2.5 s freeze is a stall to everyone else.
const LOCKS = {
  LOCK_DURATION_MS: '600',
  STALLED_INTERVAL_MS: '300',
  RECONCILE_DEADLINE_MS: '3000',
  RECONCILE_POLL_MS: '50',
};

let h: Harness;
beforeEach(async () => {
  h = await createHarness('falsestall', LOCKS);
});
afterEach(async () => {
  await h.close();
});

describe('false stall (event loop blocked longer than the lock)', () => {
  for (const point of ['after_reservation', 'after_dispatched', 'after_call']) {
    it(`frozen ${point}: the step is delivered again (to the other worker, or to this one once it wakes); still one email, each step committed once`, async () => {
      const spec = buildSpec(
        h.ctx,
        {
          tenant: 'acme',
          ticket: sampleTicket(`FS-${point}`),
          budget: { maxSteps: 10 },
          agent: { model: 'scripted', script: [read, email, final] as Script },
        },
        Date.now(),
      );
      await h.ctx.store.create(spec, Date.now());
      const frozen = await spawnWorker({ ...h.env, PAUSE_POINTS: `${point}@2=2500` });
      const ledger = new Ledger(h.ctx.redis, h.ctx.keys);
      await until('step 2 planning its email', 20_000, async () => (await ledger.listForRun(spec.runId)).length > 0);
      // The first worker is frozen now; this one takes over once the lock has expired.
      await h.startWorker();
      expect(await h.waitForStatus(spec.runId, ['completed', 'failed', 'needs_human'], 20_000)).toBe('completed');
      // The frozen worker wakes up and tries to finish its copy of step 2: its commit is the last thing it does.
      await until('the frozen delivery refused at its fence', 15_000, () =>
        frozen.lines.some((l) => l.includes('"code":"lock_lost"')),
      );
      frozen.child.kill('SIGTERM');
      expect((await frozen.exited).code).toBe(0);

      const counts = h.sandbox.counts();
      expect(counts.byResource.emails.records).toBe(1);
      expect(counts.duplicates).toBe(0);
      const transcript = await h.ctx.store.transcript(spec.runId);
      expect(transcript.filter((e) => e.kind === 'decision').map((e) => e.step)).toEqual([1, 2, 3]);
      expect(transcript.filter((e) => e.kind === 'observation' && e.step === 2)).toHaveLength(1);
      const state = await h.ctx.store.readState(spec.runId);
      expect(state?.used.steps).toBe(3);
      expect(state?.status).toBe('completed');
      const [action] = await ledger.listForRun(spec.runId);
      expect(action?.state).toBe('confirmed');
      // The frozen delivery, once awake, could not commit: its lock had expired (the fence refused it).
      expect(frozen.lines.some((l) => l.includes('"code":"lock_lost"'))).toBe(true);
    });
  }
});
