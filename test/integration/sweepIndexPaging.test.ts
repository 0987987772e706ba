/**
 * The open-actions index the reconciler sweeps, and the human queue operators list, outlive nothing: an entry whose
 * ledger record is gone (expired with its run, erased) is removed when it is read. Entries the sweep leaves where
 * they are (no tool for them in this process, a live owner) are paged past. Before, the sweep read the first 100
 * entries only and kept every ghost: 100 of them at the head of a shard hid every real action behind them, forever.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Ledger } from '../../src/ledger/ledger.js';
import { Reconciler } from '../../src/ledger/reconciler.js';
import { humanQueue } from '../../src/http/operators/reconciliations.js';
import { buildSpec } from '../../src/producer/intake.js';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { dispatchedEmail, runIdsIn } from '../support/openActions.js';
import { final } from '../../testkit/turns.js';

let h: Harness;
let ledger: Ledger;
beforeAll(async () => {
  h = await createHarness('sweepindexpaging', { RECONCILE_DEADLINE_MS: '2000', RECONCILE_POLL_MS: '20' });
  ledger = new Ledger(h.ctx.redis, h.ctx.keys);
});
afterAll(async () => {
  await h.close();
});

describe('the open-actions index, swept past what it cannot settle', () => {
  it('100 ghosts and 100 actions of no tool here at the head: the real action is reconciled, the ghosts removed', async () => {
    const real = buildSpec(
      h.ctx,
      { tenant: 'acme', ticket: sampleTicket(`IP-${Date.now()}`), agent: { model: 'scripted', script: [final] } },
      Date.now(),
    );
    await h.ctx.store.create(real, Date.now());
    const shard = h.ctx.keys.shardOf(real.runId);
    const index = h.ctx.keys.openActions(shard);
    // Ghosts: open actions whose records expired with their runs.
    for (const runId of runIdsIn(h, shard, `r_ghost_${Date.now()}`, 100)) {
      const actionId = await dispatchedEmail(h, ledger, runId, 'ghost@example.com');
      await h.ctx.redis.del(h.ctx.keys.action(runId, actionId));
    }
    // Actions of runs this process holds no spec for: left open for a process that runs their agent.
    const elsewhere: string[] = [];
    for (const runId of runIdsIn(h, shard, `r_elsewhere_${Date.now()}`, 100))
      elsewhere.push(await dispatchedEmail(h, ledger, runId, 'elsewhere@example.com'));
    await new Promise((res) => setTimeout(res, 5));
    const realAction = await dispatchedEmail(h, ledger, real.runId, 'ada@example.com');
    expect(await h.ctx.redis.zcard(index)).toBe(201);

    const report = await new Reconciler(h.ctx, 'reconciler:paging').sweep(Date.now() + 3600_000);

    expect((await ledger.get(real.runId, realAction))?.state).toBe('confirmed');
    expect(report.actionIndexPruned).toBe(100);
    expect(report.outcomes).toEqual({ confirmed: 1 });
    // What is left: the actions of no tool here, still open.
    expect((await h.ctx.redis.zrange(index, 0, -1)).sort()).toEqual([...elsewhere].sort());
  });

  it('a human-queue entry whose record is gone leaves the queue when it is listed', async () => {
    const [runId] = runIdsIn(h, 0, `r_gonehuman_${Date.now()}`, 1);
    const actionId = await dispatchedEmail(h, ledger, runId!, 'human@example.com');
    await ledger.transition(runId!, actionId, 'dispatched', 'outcome_unknown', { by: 'test', why: 'setup' });
    await ledger.transition(runId!, actionId, 'outcome_unknown', 'needs_human', { by: 'test', why: 'setup' });
    expect(await h.ctx.redis.zscore(h.ctx.keys.humanQueue(0), actionId)).not.toBeNull();
    await h.ctx.redis.del(h.ctx.keys.action(runId!, actionId));

    expect((await humanQueue(h.ctx, ledger, '*')).map((i) => i.actionId)).not.toContain(actionId);
    expect(await h.ctx.redis.zscore(h.ctx.keys.humanQueue(0), actionId)).toBeNull();
  });
});
