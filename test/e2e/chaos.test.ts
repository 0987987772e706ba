/**
 * CI-sized chaos campaign (test/e2e/chaos/campaign.ts): real Redis with AOF,
 * real worker processes SIGKILLed (also at named crash points) and SIGTERMed,
 * one Redis restart; every invariant must hold. Plus the negative control:
 * with idempotency disabled against a key-ignoring service, the checker must
 * see duplicates.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { killSpawned } from '../../testkit/processes.js';
import { runCampaign } from './chaos/campaign.js';

// A campaign cut short (its time limit) has not stopped its fleet: nothing it started outlives the test.
afterEach(killSpawned);

describe('chaos campaign', () => {
  it('keeps every invariant under kills, crash points, SIGTERMs and a Redis restart', async () => {
    const r = await runCampaign({
      runs: 40,
      seconds: 25,
      seed: 7,
      workers: 3,
      chaosEverySec: 1.2,
      crashPointProbability: 0.6,
      redisRestarts: 1,
      drainSeconds: 60,
    });
    expect(r.killsTotal).toBeGreaterThanOrEqual(5);
    expect(r.killsTotal - r.kills.external!).toBeGreaterThanOrEqual(1);
    expect(r.redisRestarts).toBe(1);
    expect(r.duplicates).toBe(0);
    expect(r.duplicateKeys).toEqual([]);
    expect(r.lostRuns).toEqual([]);
    expect(r.unknowns.unresolved).toEqual([]);
    expect(r.budgetBreaches).toEqual([]);
    expect(r.journalProblems).toEqual([]);
    expect(r.failures).toEqual([]);
    expect(
      r.completed + (r.statuses.needs_human ?? 0) + (r.statuses.failed ?? 0) + (r.statuses.budget_exceeded ?? 0),
    ).toBe(40);
    expect(r.effects).toBeGreaterThan(0);
    expect(r.ok).toBe(true);
  }, 240_000);

  it('negative control: with the ledger bypassed and keys ignored, the checker reports duplicates', async () => {
    const r = await runCampaign({
      runs: 20,
      seconds: 12,
      seed: 3,
      workers: 2,
      unsafe: true,
      // Every worker armed, and outside kills rarer than a run's steps: an armed worker reaches its point however
      // slow the machine is (with 0.7 and a kill a second, a loaded machine could kill every armed worker first).
      chaosEverySec: 3,
      crashPointProbability: 1,
      redisRestarts: 0,
      drainSeconds: 45,
    });
    expect(r.duplicates).toBeGreaterThan(0);
    expect(r.duplicateKeys.length).toBeGreaterThan(0);
    expect(r.ok).toBe(true);
  }, 240_000);
});
