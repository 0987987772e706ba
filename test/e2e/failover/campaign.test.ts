/**
 * The failover campaign in the suite (small: one kill, a few runs a second; the bigger run is the script,
 * `npx tsx test/e2e/failover/campaign.ts`). Real processes on a replicated Redis whose master is SIGKILLed while its
 * replicas are behind, so every write of that window that was not waited for is lost; a model stand-in answers
 * differently every time; the sandbox counts emails per recipient and tickets per source ticket. With
 * REDIS_MIN_REPLICAS=1: nothing acknowledged vanishes, every run ends, nothing is sent twice.
 * - On a Cluster with replicas: in the default suite.
 * - On Sentinel (a master, two replicas, three sentinels): a duplicate ticket was seen in two of five larger runs and
 *   in one suite run; its cause (a decision lost in the failover, acted on against the promoted master) is fenced
 *   and reproduced by lostDecision.test.ts (docs/failover.md). Still off in the default suite (about 2 minutes of
 *   two cores, and a rare interleaving no single run proves absent); run it with FAILOVER_CAMPAIGN=1.
 * A failure names the duplicate's records, and each run left at work, in the campaign's log; SENTINEL_KEEP_DIR=1 keeps
 * the nodes' files.
 */
import { describe, expect, it } from 'vitest';
import { runFailoverCampaign } from './campaign.js';

describe.skipIf(process.env.FAILOVER_CAMPAIGN !== '1')(
  'failover campaign: replicas behind, master SIGKILLed, waits on',
  () => {
    it('no acknowledged run lost, every run terminal, no second email or ticket', async () => {
      const r = await runFailoverCampaign({
        minReplicas: 1,
        lag: true,
        kills: 1,
        lagMs: 1500,
        rate: 4,
        log: console.log,
      });
      expect(r.acknowledged).toBeGreaterThan(20);
      expect(r.answered500).toBe(0);
      expect(r.vanished).toBe(0);
      expect(r.notTerminal).toBe(0);
      expect(r.duplicateEmails).toBe(0);
      expect(r.duplicateTickets).toBe(0);
      expect(r.duplicateKeys).toBe(0);
      expect(r.recoveryMs).toHaveLength(1);
    }, 240_000);
  },
);

// On by default: two larger runs (2 and 3 kills, 206 and 288 runs) ended clean once the fetch watch was in.
describe('failover campaign on a Redis Cluster with replicas: a master SIGKILLed with its replica behind, waits on', () => {
  it('no acknowledged run lost, every run terminal, no second email or ticket', async () => {
    const r = await runFailoverCampaign({
      store: 'cluster',
      minReplicas: 1,
      lag: true,
      kills: 1,
      lagMs: 1500,
      rate: 4,
      log: console.log,
    });
    expect(r.acknowledged).toBeGreaterThan(20);
    expect(r.answered500).toBe(0);
    expect(r.vanished).toBe(0);
    expect(r.notTerminal).toBe(0);
    expect(r.duplicateEmails).toBe(0);
    expect(r.duplicateTickets).toBe(0);
    expect(r.duplicateKeys).toBe(0);
  }, 300_000);
});
