/**
 * The same action twice in one step: the model asked for one write twice in one turn (one identity, one action id),
 * and the two calls run side by side in this process. One send; the second call is answered from the first,
 * `deduplicated`, never parked because it read the first's `dispatched` as an owner that died. A late answer of the
 * service settles an action that went to a person meanwhile, and what is sent is what the ledger recorded.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Ledger } from '../../src/ledger/ledger.js';
import { createEffectRunner } from '../../src/ledger/runner.js';
import { actionIdentity } from '../../src/ledger/identity.js';
import { defineWriteTool } from '../../src/core/agent.js';
import type { WriteTool } from '../../src/core/tool.js';
import { createHarness, type Harness } from '../../testkit/harness.js';

type Args = { to: string; body: string };

let h: Harness;
let ledger: Ledger;
beforeAll(async () => {
  h = await createHarness('sameaction', { RECONCILE_DEADLINE_MS: '300', RECONCILE_POLL_MS: '20' });
  ledger = new Ledger(h.ctx.redis, h.ctx.keys);
});
afterAll(async () => {
  await h.close();
});

let seq = 0;
const runCtx = () => ({
  runId: `same-${++seq}-${Date.now()}`,
  step: 1,
  signal: new AbortController().signal,
  input: {},
});

/** A write whose service enforces the key and offers no lookup; each request takes `ms` and is recorded. */
function notifyTool(sent: { key: string; body: string }[], ms = 300, during?: (key: string) => Promise<void>) {
  return defineWriteTool<Args>({
    name: 'notify',
    description: 'tell the customer',
    args: z.object({ to: z.string(), body: z.string() }),
    identity: (a) => ({ to: a.to }),
    service: { enforcesKey: true, reconcile: 'none' },
    async dispatch(a, _ctx, req) {
      await new Promise((res) => setTimeout(res, ms));
      await during?.(req.idempotencyKey);
      sent.push({ key: req.idempotencyKey, body: a.body });
      return { receipt: `rcpt-${sent.length}`, output: { id: `rcpt-${sent.length}` }, replayed: false };
    },
  }) as WriteTool;
}

const counter = async (name: string, labels: Record<string, string>) =>
  (await h.ctx.metrics.registry.getSingleMetric(name)?.get())?.values
    .filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))
    .reduce((n, v) => n + v.value, 0) ?? 0;

describe('the same action twice in one step', () => {
  it('two identical calls at once: one send, one ok, one deduplicated, the receipt recorded, nobody parked', async () => {
    const sent: { key: string; body: string }[] = [];
    const tool = notifyTool(sent);
    const runner = createEffectRunner(h.ctx);
    const ctx = runCtx();
    const args = { to: 'ada@example.com', body: 'Your refund is on its way.' };
    const results = await Promise.all([
      runner.run({ tool, args, call: { id: 'c1' }, ctx, tenant: 'acme' }),
      runner.run({ tool, args, call: { id: 'c2' }, ctx, tenant: 'acme' }),
    ]);
    expect(sent).toHaveLength(1);
    expect(results.map((r) => r.kind)).toEqual(['observed', 'observed']);
    expect(results.map((r) => r.status).sort()).toEqual(['deduplicated', 'ok']);
    expect(new Set(results.map((r) => r.actionId)).size).toBe(1);
    const rec = (await ledger.get(ctx.runId, results[0].actionId))!;
    expect(rec).toMatchObject({ state: 'confirmed', receipt: 'rcpt-1', attempts: 1 });
    const history = await ledger.history(ctx.runId, rec.actionId);
    expect(history.map((x) => x.to)).toEqual(['planned', 'authorized', 'dispatched', 'confirmed']);
  });

  it('a late answer after the action went to a person settles it: confirmed with the receipt, counted', async () => {
    const sent: { key: string; body: string }[] = [];
    const ctx = runCtx();
    const args = { to: 'bob@example.com', body: 'Done.' };
    // While the request is out, a sweeper takes the action for abandoned and hands it to a person.
    const tool = notifyTool(sent, 50, async () => {
      const { actionId } = actionIdentity(ctx.runId, tool, args);
      const by = { by: 'reconciler:test', why: 'swept' };
      await ledger.transition(ctx.runId, actionId, 'dispatched', 'outcome_unknown', by);
      await ledger.transition(ctx.runId, actionId, 'outcome_unknown', 'needs_human', by);
    });
    const before = await counter('agent_late_receipts_total', { outcome: 'recorded' });
    const result = await createEffectRunner(h.ctx).run({ tool, args, call: { id: 'c1' }, ctx, tenant: 'acme' });
    expect(result).toMatchObject({ kind: 'observed', status: 'ok' });
    const rec = (await ledger.get(ctx.runId, result.actionId))!;
    expect(rec).toMatchObject({ state: 'confirmed', receipt: 'rcpt-1' });
    expect((await ledger.history(ctx.runId, rec.actionId)).map((x) => x.to)).toEqual([
      'planned',
      'authorized',
      'dispatched',
      'outcome_unknown',
      'needs_human',
      'confirmed',
    ]);
    expect(await counter('agent_late_receipts_total', { outcome: 'recorded' })).toBe(before + 1);
    const queue = await ledger.indexed(h.ctx.keys.humanQueue(h.ctx.keys.shardOf(ctx.runId)), Infinity, 1000);
    expect(queue.some((x) => x.actionId === rec.actionId)).toBe(false);
  });

  it('what is sent is what the ledger recorded, whatever the later call of the same action carries', async () => {
    const sent: { key: string; body: string }[] = [];
    const tool = notifyTool(sent, 0);
    const ctx = runCtx();
    const recorded = { to: 'cy@example.com', body: 'The text the decision recorded.' };
    const { actionId } = actionIdentity(ctx.runId, tool, recorded);
    // Recorded and proven not sent (safe_retry), as a refused first dispatch leaves it.
    await ledger.plan(ctx.runId, 1, 'c1', tool.name, actionIdentity(ctx.runId, tool, recorded), recorded, 'test');
    const by = { by: 'test', why: 'setup' };
    await ledger.transition(ctx.runId, actionId, 'planned', 'authorized', by);
    await ledger.transition(ctx.runId, actionId, 'authorized', 'dispatched', by);
    await ledger.transition(ctx.runId, actionId, 'dispatched', 'outcome_unknown', by);
    await ledger.transition(ctx.runId, actionId, 'outcome_unknown', 'safe_retry', by);
    const other = { to: 'cy@example.com', body: 'Other words, same identity.' };
    const result = await createEffectRunner(h.ctx).run({ tool, args: other, call: { id: 'c1' }, ctx, tenant: 'acme' });
    expect(result).toMatchObject({ kind: 'observed', status: 'ok', actionId });
    expect(sent).toEqual([{ key: (await ledger.get(ctx.runId, actionId))!.idempotencyKey, body: recorded.body }]);
  });
});
