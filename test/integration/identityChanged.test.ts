/**
 * A tool's `identity` is code, and code changes between two deliveries of one step: a deploy, or an operator's
 * continue of a version-parked run under the version live workers serve. The step's journalled decision then asks
 * again for the write it asked for before, and the new identity computes another action id, another idempotency key.
 * One call of a step (its step and call id) is one action: the call gets the action it planned, with its key, and the
 * service is never sent a second request under a second key.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Ledger } from '../../src/ledger/ledger.js';
import { createEffectRunner } from '../../src/ledger/runner.js';
import { actionIdentity } from '../../src/ledger/identity.js';
import { defineWriteTool } from '../../src/core/agent.js';
import type { WriteTool } from '../../src/core/tool.js';
import { createHarness, type Harness } from '../../testkit/harness.js';

type Args = { orderId: string; amountCents: number; note: string };
type Sent = { key: string; orderId: string };

let h: Harness;
let ledger: Ledger;
beforeAll(async () => {
  h = await createHarness('identitychanged', { RECONCILE_DEADLINE_MS: '300', RECONCILE_POLL_MS: '20' });
  ledger = new Ledger(h.ctx.redis, h.ctx.keys);
});
afterAll(async () => {
  await h.close();
});

let seq = 0;
const runCtx = () => ({
  runId: `idch-${++seq}-${Date.now()}`,
  step: 3,
  signal: new AbortController().signal,
  input: {},
});

/**
 * A refund whose service enforces the key (a second request under a key it has seen answers the first's result) and
 * offers no lookup. `identity` picks the arguments that name the refund: release 1 the order, release 2 the order and
 * the amount.
 */
function refundTool(release: 1 | 2, sent: Sent[]): WriteTool {
  const byKey = new Map<string, string>();
  return defineWriteTool<Args>({
    name: 'refund',
    description: 'refund an order',
    args: z.object({ orderId: z.string(), amountCents: z.number().int(), note: z.string() }),
    identity:
      release === 1 ? (a) => ({ orderId: a.orderId }) : (a) => ({ orderId: a.orderId, amountCents: a.amountCents }),
    service: { enforcesKey: true, reconcile: 'none' },
    async dispatch(a, _ctx, req) {
      sent.push({ key: req.idempotencyKey, orderId: a.orderId });
      const receipt = byKey.get(req.idempotencyKey) ?? `re_${sent.length}`;
      const replayed = byKey.has(req.idempotencyKey);
      byKey.set(req.idempotencyKey, receipt);
      return { receipt, output: { refund: receipt }, replayed };
    },
  });
}

const args: Args = { orderId: 'ord_1', amountCents: 1500, note: 'late delivery' };

/** The refund asked for by one call of the run's step, through the ledger as a step's write goes. */
const refund = (tool: WriteTool, ctx: ReturnType<typeof runCtx>, callArgs: Args = args, callId = 'call_a') =>
  createEffectRunner(h.ctx).run({ tool, args: callArgs, call: { id: callId }, ctx, tenant: 'acme' });

describe("a tool's identity changed between two deliveries of a step", () => {
  it('a settled write: the call is answered from the action it planned, no second request, no second action', async () => {
    const sent: Sent[] = [];
    const ctx = runCtx();
    const first = await refund(refundTool(1, sent), ctx);
    if (first.kind !== 'observed') throw new Error(`release 1's refund parked: ${first.reason}`);
    expect(first.status).toBe('ok');

    // The same call of the same step, delivered again to a worker of release 2.
    const release2 = refundTool(2, sent);
    const computed = actionIdentity(ctx.runId, release2, args).actionId;
    expect(computed).not.toBe(first.actionId);
    const again = await refund(release2, ctx);
    expect(again).toMatchObject({ kind: 'observed', status: 'ok', actionId: first.actionId, output: first.output });
    expect(sent).toHaveLength(1);
    expect(await ledger.get(ctx.runId, computed)).toBeUndefined();
    expect(await h.ctx.redis.smembers(h.ctx.keys.run(ctx.runId).actions)).toEqual([
      h.ctx.keys.action(ctx.runId, first.actionId),
    ]);
  });

  it('a write whose answer was lost: driven under the key it was sent with, and settled by the service', async () => {
    const sent: Sent[] = [];
    const ctx = runCtx();
    const release1 = refundTool(1, sent);
    const id1 = actionIdentity(ctx.runId, release1, args);
    // Release 1 planned the action and sent it; its worker died before the answer was recorded.
    await ledger.plan(ctx.runId, ctx.step, 'call_a', 'refund', id1, args, 'worker-1');
    const by = { by: 'worker-1', why: 'setup' };
    await ledger.transition(ctx.runId, id1.actionId, 'planned', 'authorized', by);
    await ledger.transition(ctx.runId, id1.actionId, 'authorized', 'dispatched', by);
    sent.push({ key: id1.idempotencyKey, orderId: args.orderId });

    const result = await refund(refundTool(2, sent), ctx);
    expect(result.actionId).toBe(id1.actionId);
    // Whatever the service was asked after the first request, it was asked under the first request's key.
    expect(new Set(sent.map((s) => s.key))).toEqual(new Set([id1.idempotencyKey]));
    const rec = (await ledger.get(ctx.runId, id1.actionId))!;
    expect(rec.idempotencyKey).toBe(id1.idempotencyKey);
    expect(await h.ctx.redis.scard(h.ctx.keys.run(ctx.runId).actions)).toBe(1);
  });

  it('another call of the step (another call id) is another action, under the identity of today', async () => {
    const sent: Sent[] = [];
    const ctx = runCtx();
    const first = await refund(refundTool(1, sent), ctx);
    const other = { ...args, amountCents: 900 };
    const release2 = refundTool(2, sent);
    const second = await refund(release2, ctx, other, 'call_b');
    expect(second).toMatchObject({ kind: 'observed', status: 'ok' });
    expect(second.actionId).toBe(actionIdentity(ctx.runId, release2, other).actionId);
    expect(second.actionId).not.toBe(first.actionId);
    expect(sent).toHaveLength(2);
  });
});
