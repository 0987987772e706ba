/**
 * Retention: a finished run's keys (run hash, budget, journal, events, actions
 * set, and its ledger records, their histories and idempotency reservations)
 * carry a TTL of RUN_RETENTION_MS from the moment the run ends, and are gone
 * once it elapses; an unfinished run's keys carry none.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { Compactor } from '../../src/runs/compactor.js';
import { buildSpec } from '../../src/producer/intake.js';
import { Reconciler } from '../../src/ledger/reconciler.js';
import { until } from '../../testkit/until.js';
import { FOLDED_HISTORY_FIELD } from '../../src/store/ledgerHistory.js';
import { childRunsOf, handoffDigestOf } from '../../src/runs/children.js';
import { stopRun } from '../../src/runs/stop.js';
import { retryRun } from '../../src/runs/retryRun.js';

const RETENTION_MS = 1500;
let h: Harness;
beforeEach(async () => {
  h = await createHarness('retention', { RUN_RETENTION_MS: String(RETENTION_MS) });
});
afterEach(async () => {
  await h.close();
});

async function createSupportRun(id: string): Promise<string> {
  const t = sampleTicket(id);
  const spec = buildSpec(
    h.ctx,
    { tenant: 'acme', ticket: { ...t, customer: { ...t.customer, email: `${id.toLowerCase()}@example.com` } } },
    Date.now(),
  );
  expect(await h.ctx.store.create(spec, Date.now())).toBe(true);
  return spec.runId;
}

/**
 * Every key an ended run owns after its compaction: its run keys (the journal and events packed beside the emptied
 * stream), then per ledger action the record, and its history list unless the compaction folded it into the record;
 * `reservations`: the actions' reservation keys, which the compaction drops (the record holds the key).
 */
async function runKeys(
  runId: string,
): Promise<{ run: string[]; ledger: string[]; folded: number; reservations: string[] }> {
  const k = h.ctx.keys.run(runId);
  const ledger: string[] = [];
  const reservations: string[] = [];
  let folded = 0;
  for (const actionKey of await h.ctx.redis.smembers(k.actions)) {
    ledger.push(actionKey);
    if (await h.ctx.redis.hexists(actionKey, FOLDED_HISTORY_FIELD)) folded++;
    else ledger.push(`${actionKey}:history`);
    const reservation = await h.ctx.redis.hget(actionKey, 'reservationKey');
    if (reservation) reservations.push(reservation);
  }
  return {
    run: [k.run, k.budget, k.journalPacked, k.events, k.eventsPacked, k.actions],
    ledger,
    folded,
    reservations,
  };
}

const pttls = (keys: string[]) => Promise.all(keys.map((key) => h.ctx.redis.pttl(key)));

describe('retention of finished runs (RUN_RETENTION_MS)', () => {
  it("a completed run's keys, ledger included, expire RUN_RETENTION_MS after it ends; an unfinished run's keys do not", async () => {
    const worker = await h.startWorker();
    const done = await createSupportRun('RET-1');
    expect(await h.waitForStatus(done, ['completed', 'failed', 'needs_human'], 20_000)).toBe('completed');
    const endedAt = Date.now();
    await worker.stop();
    // Compacted, as the reconciler's compactor does after a run's end (src/runs/compactor.ts).
    await new Compactor(h.ctx).drain();

    const keys = await runKeys(done);
    // create_ticket and send_email: a record each, their histories folded into the records and their reservations
    // dropped at the end; the journal list is packed (the list itself is gone).
    expect(keys.folded).toBe(2);
    expect(keys.ledger.length).toBe(2);
    expect(keys.reservations.length).toBe(2);
    expect(await h.ctx.redis.exists(...keys.reservations, h.ctx.keys.run(done).journal)).toBe(0);
    const all = [...keys.run, ...keys.ledger];
    // Every key exists and carries a TTL of at most the retention (-1 = no TTL, -2 = missing).
    for (const [i, ttl] of (await pttls(all)).entries()) {
      expect(ttl, all[i]).toBeGreaterThan(0);
      expect(ttl, all[i]).toBeLessThanOrEqual(RETENTION_MS);
    }

    // A run that has not finished keeps its keys without a TTL.
    const open = await createSupportRun('RET-2');
    const openKeys = [h.ctx.keys.run(open).run, h.ctx.keys.run(open).budget];
    expect(await pttls(openKeys)).toEqual([-1, -1]);

    // Once the retention has elapsed, the finished run's keys are gone; the open run's are not.
    await until(
      "the finished run's keys expired",
      endedAt + RETENTION_MS + 5000 - Date.now(),
      async () => (await h.ctx.redis.exists(...all)) === 0,
      50,
    );
    expect(Date.now() - endedAt).toBeGreaterThanOrEqual(RETENTION_MS - 500); // expired by TTL, not deleted at once
    expect(await h.ctx.redis.exists(...all)).toBe(0);
    expect(await h.ctx.redis.exists(...openKeys)).toBe(2);

    // The shard's run index outlives the keys until the reconciler's sweep prunes it; the open run stays listed.
    const index = h.ctx.keys.runIndex(h.ctx.keys.shardOf(done));
    expect(await h.ctx.redis.zscore(index, done)).not.toBeNull();
    await h.ctx.redis.zadd(index, Date.now() - 2 * RETENTION_MS, open); // even an old entry, while the run lives
    const report = await new Reconciler(h.ctx, 'reconciler:retention').sweep();
    expect(report.indexPruned).toBe(1);
    expect(await h.ctx.redis.zscore(index, done)).toBeNull();
    expect(await h.ctx.redis.zscore(index, open)).not.toBeNull();
  });

  it("a run's children and hand-offs follow its keys: the retention from its end, none again once it is retried", async () => {
    const parent = await createSupportRun('RET-KIDS');
    const k = h.ctx.keys.run(parent);
    // Listed as a step lists a hand-off's child: a TTL past the parent's deadline (an hour away here).
    const handoff = handoffDigestOf(parent, 'ask_billing', { order: 'O-1' });
    const child = 'r_0000000000000000000000aa';
    await childRunsOf(h.ctx).list(parent, child, Date.now() + 3_600_000, Date.now(), handoff);
    expect((await pttls([k.children, k.handoffs])).every((t) => t > RETENTION_MS)).toBe(true);

    // Ended: the retention, as every key of the run.
    const stopped = await stopRun(h.ctx, parent, {
      expected: ['queued', 'running'],
      status: 'failed',
      reason: 'test_stop',
      now: Date.now(),
    });
    expect(stopped.stopped).toBe(true);
    for (const ttl of await pttls([k.run, k.children, k.handoffs])) {
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(RETENTION_MS);
    }

    // Retried: at work again, nothing of it expires, the hand-off record included (a hand-off asked again finds its
    // child however long the retried run lives).
    const retried = await retryRun(h.ctx, parent, 'ops', {});
    expect(retried.ok).toBe(true);
    expect(await pttls([k.run, k.children, k.handoffs])).toEqual([-1, -1, -1]);
    expect(await childRunsOf(h.ctx).earlier(parent, handoff, 'r_0000000000000000000000bb')).toBe(child);
  });
});
