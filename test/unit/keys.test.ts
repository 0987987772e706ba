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
