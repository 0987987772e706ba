/** KeySpace names every key: the ones that used to be built inline, and the BullMQ ones it mirrors. */
import { describe, expect, it } from 'vitest';
import { QueueKeys } from 'bullmq';
import { KeySpace, queueNameOf } from '../../src/store/keys.js';

describe('KeySpace', () => {
  const keys = new KeySpace('agent', 'bull', 4);

  it('webhook event keys: deterministic per (tenant, agent, hook, event), never carry any as text', () => {
    const a = keys.webhookEvent('acme', 'support', 'tickets', 'evt-1');
    expect(a).toBe(keys.webhookEvent('acme', 'support', 'tickets', 'evt-1'));
    expect(a).not.toBe(keys.webhookEvent('acme', 'support', 'tickets', 'evt-2'));
    expect(a).not.toBe(keys.webhookEvent('acme2', 'support', 'tickets', 'evt-1'));
    expect(a).not.toBe(keys.webhookEvent('acme', 'support', 'zendesk', 'evt-1'));
    expect(a).not.toBe(keys.webhookEvent('acme', 'orders', 'tickets', 'evt-1'));
    expect(a).toMatch(/^agent:webhook-event:[0-9a-f]{32}$/);
  });

  it('event keys are per (tenant, agent, key); an event id record shares the key hash tag', () => {
    const k = keys.eventKey('acme', 'support', 'reply:1');
    expect(k).not.toBe(keys.eventKey('acme', 'orders', 'reply:1'));
    expect(keys.eventIdRecord(k, 'e-1').startsWith(`${k}:id:`)).toBe(true);
    const kept = keys.keptDeliveries('acme');
    expect(kept.bytes.startsWith(kept.set)).toBe(true);
  });

  it('an action history list lives next to its action', () => {
    const action = keys.action('r_000000000000000000000001', 'a_00000000000000000000000000000001');
    expect(keys.actionHistory(action)).toBe(`${action}:history`);
  });

  it("BullMQ's own key names: the lock, the job hash, the marker and the finished sets are what BullMQ builds", () => {
    const q = queueNameOf(2);
    const bull = new QueueKeys('bull').getKeys(q);
    expect(keys.queueMarker(q)).toBe(bull.marker);
    expect(keys.finishedSet(2, 'failed')).toBe(bull.failed);
    expect(keys.finishedSet(2, 'completed')).toBe(bull.completed);
    expect(keys.jobHash(2, 'j1')).toBe(`${bull['']}j1`);
    expect(keys.jobLock(2, 'j1')).toBe(`${bull['']}j1:lock`);
  });

  it("a run's keys: under its shard's tag, one frozen object per run (a step names them in every write)", () => {
    const runId = 'r_000000000000000000000001';
    const k = keys.run(runId);
    expect(k.run).toBe(`agent:{${keys.shardOf(runId)}}:run:${runId}`);
    expect([k.budget, k.journal, k.events, k.actions]).toEqual(
      ['budget', 'journal', 'events', 'actions'].map((s) => `${k.run}:${s}`),
    );
    expect(keys.run(runId)).toBe(k);
    expect(Object.isFrozen(k)).toBe(true);
  });

  it('the reconciler leader lock is under the prefix', () => {
    expect(keys.reconcilerLeader()).toBe('agent:reconciler:leader');
  });
});

describe('follow-up run ids', () => {
  it('one run per event, on the subject home shard; the event-less run id is unchanged', async () => {
    const { runIdFor, runIdForEvent, subjectShard, shardOf, RUN_ID_FORMAT } = await import('../../src/store/keys.js');
    for (const shards of [1, 6, 64]) {
      for (let i = 0; i < 20; i++) {
        const subject = `T-${i}`;
        const home = subjectShard('acme', 'support', subject, shards);
        expect(home).toBe(shardOf(runIdFor('acme', 'support', subject), shards));
        const a = runIdForEvent('acme', 'support', subject, 'e-1', shards);
        const b = runIdForEvent('acme', 'support', subject, 'e-2', shards);
        expect(a).toMatch(RUN_ID_FORMAT);
        expect(a).toBe(runIdForEvent('acme', 'support', subject, 'e-1', shards));
        expect(a).not.toBe(b);
        expect(a).not.toBe(runIdFor('acme', 'support', subject));
        expect([shardOf(a, shards), shardOf(b, shards)]).toEqual([home, home]);
      }
    }
    expect(runIdForEvent('acme', 'support', 'T-1', 'e-1', 6)).not.toBe(
      runIdForEvent('other', 'support', 'T-1', 'e-1', 6),
    );
  });
});

describe('digests in key names and run ids', () => {
  // Stored runs, subjects, indexes and records are found again by these names: a digest computed another way must
  // give exactly the same text (values recorded from the createHash implementation these replaced).
  it('name what is already stored exactly as before', async () => {
    const { runIdFor, runIdForEvent, shardOf } = await import('../../src/store/keys.js');
    const k = new KeySpace('agent', 'bull', 6);
    expect([shardOf('r_0123456789abcdef01234567', 6), shardOf('r_fedcba9876543210fedcba98', 64)]).toEqual([4, 63]);
    expect(runIdFor('acme', 'support', 'T-1')).toBe('r_b46fd5b04da09ae58eb01aaf');
    expect(runIdForEvent('acme', 'support', 'T-1', 'evt-é-1', 6)).toBe('r_b4aab328b029e8d515fea3e4');
    expect(k.subjectLatest('acme', 'support', 'T-ü-1')).toBe('agent:{1}:subject:e88f4800045a56b61b35aeab554a21a6');
    expect(k.requestKey('acme', 'key-1')).toBe('agent:request-key:a1e0eddb234fc0178a329d566e0a9401');
    expect(k.eventKey('acme', 'support', 'reply:1')).toBe('agent:event:{611ab6774b3057fc6442a583c43c55d8}');
    expect(k.eventIdRecord('x', 'e-1')).toBe('x:id:b94f523196aaacd8bdb9ef0d8cf2e1d8');
    expect(k.keptDeliveries('acme').set).toBe('agent:kept:{822b33ad87c148a0a20a5ba7cd5ebcaa}');
    expect(k.webhookEvent('acme', 'support', 'zendesk', 'evt-1')).toBe(
      'agent:webhook-event:b639f191796859364f976b3a4d80ee27',
    );
    expect(k.searchIndex(3, 'acme', 'email', 'ada@example.com')).toBe(
      'agent:{3}:search:c152347b610ead32f3f9a803c56e5270',
    );
  });

  it("a subject's latest-run record sits on the shard of the subject's event-less run", async () => {
    const { runIdFor, subjectShard } = await import('../../src/store/keys.js');
    for (const shards of [1, 6, 64]) {
      const k = new KeySpace('agent', 'bull', shards);
      for (let i = 0; i < 50; i++) {
        const home = subjectShard('acme', 'support', `T-${i}`, shards);
        expect(home).toBe(k.shardOf(runIdFor('acme', 'support', `T-${i}`)));
        expect(k.subjectLatest('acme', 'support', `T-${i}`)).toMatch(new RegExp(`^agent:\\{${home}\\}:subject:`));
      }
    }
  });
});
