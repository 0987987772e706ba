/**
 * An action waiting for a person on a run an operator cancelled: an email whose answer was lost by a service with no
 * lookup parks the run needs_human with the action in the human queue, and the operator cancels the run (terminal).
 * The item stays the person's: the run's keys (the record, its history, the run's tenant and subject) outlive the
 * retention while it waits, an erasure of the customer is refused while it waits (its arguments are what the person
 * looks up), and the person's finding settles it without resuming the run, after which the retention and an erasure
 * apply. An item whose record is gone for another reason is dropped with a log line and a counter, never silently.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ActionRecord, HistoryEntry } from '../../../src/ledger/ledger.js';
import type { Harness } from '../../../testkit/harness.js';
import { until } from '../../../testkit/until.js';
import { call, email, final, operatorHarness, startScripted, turn } from './support.js';

type Item = ActionRecord & { history: HistoryEntry[]; subject: string };

const RETENTION_MS = 1500;
let h: Harness & { url: string };
beforeAll(async () => {
  h = await operatorHarness('cancelled-human', {
    RECONCILE_DEADLINE_MS: '200',
    RECONCILE_POLL_MS: '20',
    RUN_RETENTION_MS: String(RETENTION_MS),
  });
});
afterAll(async () => {
  await h.close();
});
beforeEach(() => h.sandbox.reset());

const queue = async () =>
  (await call<{ reconciliations: Item[] }>(h.url, 'GET', '/v1/reconciliations')).body.reconciliations;

/** A run parked needs_human on an email of unknown outcome, then cancelled: its item, its ticket. */
async function cancelledWithItem(): Promise<{ runId: string; item: Item; subject: string }> {
  h.sandbox.setFaults([
    { kind: 'lost_response_after_commit', resource: 'emails', count: 1 },
    { kind: 'no_lookup', resource: 'emails' },
  ]);
  const runId = await startScripted(h, [turn([email]), final], 'CHI');
  expect(await h.waitForStatus(runId, ['needs_human', 'completed', 'failed'])).toBe('needs_human');
  h.sandbox.clearFaults();
  const item = (await queue()).find((x) => x.runId === runId)!;
  expect(item.state).toBe('needs_human');
  const cancel = await call(h.url, 'POST', `/v1/runs/${runId}/cancel`, {});
  expect(cancel.status).toBe(200);
  // The cancel says the item still waits for a person: it settles nothing.
  expect(cancel.body).toMatchObject({
    status: 'cancelled',
    cancelled: 'now',
    waitingForPerson: [{ actionId: item.actionId, state: 'needs_human' }],
  });
  return { runId, item, subject: item.subject };
}

/** Every key the item and a person's finding read: the record, its history, the run hash. */
async function itemKeys(runId: string, actionId: string): Promise<string[]> {
  const action = h.ctx.keys.action(runId, actionId);
  const keys = [action, h.ctx.keys.run(runId).run, h.ctx.keys.run(runId).actions];
  if (await h.ctx.redis.exists(h.ctx.keys.actionHistory(action))) keys.push(h.ctx.keys.actionHistory(action));
  return keys;
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const erasures = async (outcome: string) =>
  (await h.ctx.metrics.erasures.get()).values.find((v) => v.labels.outcome === outcome)?.value ?? 0;

describe('an item waiting for a person on a cancelled run', () => {
  it("outlives the run's retention, and a finding after it settles the action without resuming the run", async () => {
    const { runId, item, subject } = await cancelledWithItem();
    const keys = await itemKeys(runId, item.actionId);
    // No TTL on anything the item and its finding read while it waits (-1: persistent).
    for (const [i, ttl] of (await Promise.all(keys.map((k) => h.ctx.redis.pttl(k)))).entries())
      expect(ttl, keys[i]).toBe(-1);
    await pause(RETENTION_MS + 500);
    const later = (await queue()).find((x) => x.actionId === item.actionId);
    // Still there, whole: its arguments, its history, its run's tenant and ticket.
    expect(later).toMatchObject({ state: 'needs_human', args: item.args, tenant: 'acme', subject });
    expect(later?.history.map((x) => x.to)).toEqual(item.history.map((x) => x.to));

    const res = await call(h.url, 'POST', `/v1/reconciliations/${item.actionId}`, {
      finding: 'confirmed',
      receipt: 'em_found_by_hand',
      evidence: { note: 'found in the provider console' },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ state: 'confirmed', resumed: false });
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')).toBe('cancelled');
    expect((await queue()).find((x) => x.actionId === item.actionId)).toBeUndefined();
    // Settled: the run now gets its retention, and goes.
    for (const [i, ttl] of (await Promise.all(keys.map((k) => h.ctx.redis.pttl(k)))).entries()) {
      expect(ttl, keys[i]).toBeGreaterThan(0);
      expect(ttl, keys[i]).toBeLessThanOrEqual(RETENTION_MS);
    }
    await until(
      "the settled run's keys expired",
      RETENTION_MS + 5000,
      async () => (await h.ctx.redis.exists(...keys)) === 0,
      50,
    );
    // Nothing was sent again.
    expect(h.sandbox.counts().byResource.emails.byKey[item.idempotencyKey]).toBe(1);
  });

  it('not_sent on a cancelled run ends the action rejected (never sent, never to be), nothing sent', async () => {
    const { runId, item } = await cancelledWithItem();
    const res = await call(h.url, 'POST', `/v1/reconciliations/${item.actionId}`, {
      finding: 'not_sent',
      evidence: { note: 'nothing at the provider' },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ resumed: false, state: 'rejected' });
    const rec = await h.ctx.redis.hgetall(h.ctx.keys.action(runId, item.actionId));
    expect(rec.state).toBe('rejected');
    expect(JSON.parse(rec.output!)).toMatchObject({ rejected: true, reason: 'cancelled_by_operator' });
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')).toBe('cancelled');
    expect(await h.ctx.redis.pttl(h.ctx.keys.run(runId).run)).toBeGreaterThan(0);
    await h.untilNoJob(runId);
    // Sent once (the lost answer), never again.
    expect(h.sandbox.counts().byResource.emails.byKey[item.idempotencyKey]).toBe(1);
  });

  it("an erasure of the customer is refused (409 actions_unsettled, nothing written) while it waits, and goes through after the person's finding", async () => {
    const { runId, item, subject } = await cancelledWithItem();
    const before = await erasures('actions_unsettled');
    const refused = await call(h.url, 'POST', '/v1/erasures', { tenant: 'acme', subject });
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({
      error: 'actions_unsettled',
      actions: [{ actionId: item.actionId, runId, state: 'needs_human' }],
    });
    expect(await erasures('actions_unsettled')).toBe(before + 1);
    // Nothing written: the item's arguments, the run's spec, no erasure recorded.
    const waiting = (await queue()).find((x) => x.actionId === item.actionId);
    expect(waiting?.args).toEqual(item.args);
    expect(JSON.stringify(waiting?.args)).not.toContain('[erased]');
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'erasedAt')).toBeNull();
    expect((await h.ctx.store.readSpec(runId))?.key).toBe(subject);
    const recorded = await h.ctx.redis.lrange(h.ctx.keys.erasures(), 0, -1);
    expect(recorded.some((r) => r.includes(runId))).toBe(false);

    const found = await call(h.url, 'POST', `/v1/reconciliations/${item.actionId}`, {
      finding: 'confirmed',
      receipt: 'em_found_by_hand',
      evidence: {},
    });
    expect(found.status).toBe(200);
    const erased = await call<{ runIds: string[] }>(h.url, 'POST', '/v1/erasures', { tenant: 'acme', subject });
    expect(erased.status).toBe(201);
    expect(erased.body.runIds).toContain(runId);
    const rec = await h.ctx.redis.hgetall(h.ctx.keys.action(runId, item.actionId));
    expect(rec.state).toBe('confirmed');
    expect(rec.receipt).toBe('em_found_by_hand');
    expect(JSON.stringify(JSON.parse(rec.args!))).toContain('[erased]');
  });

  it('an item whose record is gone for another reason leaves the queue with a log line and a counter', async () => {
    const { runId, item } = await cancelledWithItem();
    const error = vi.spyOn(h.ctx.log, 'error');
    const counted = async () => (await h.ctx.metrics.humanItemsExpired.get()).values[0]?.value ?? 0;
    const before = await counted();
    // Lost some other way (evicted, deleted by hand): the record goes, the queue entry stays.
    await h.ctx.redis.del(h.ctx.keys.action(runId, item.actionId));
    expect((await queue()).find((x) => x.actionId === item.actionId)).toBeUndefined();
    expect(await counted()).toBe(before + 1);
    const logged = error.mock.calls.filter(
      ([o]) => (o as { code?: string } | undefined)?.code === 'human_item_expired',
    );
    expect(logged).toHaveLength(1);
    expect(logged[0]![0]).toMatchObject({ actionId: item.actionId });
    // Ids only: no customer text in the line.
    expect(JSON.stringify(logged[0]![0])).not.toContain('@');
    // Counted once: a second reader finds nothing left to drop.
    await queue();
    expect(await counted()).toBe(before + 1);
    error.mockRestore();
  });
});
