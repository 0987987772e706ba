import { z } from 'zod';
import { defineWriteTool } from '../../../core/agent.js';
import type { WriteTool } from '../../../core/tool.js';
import { STRIPE_KEY_WINDOW_MS, type StripeClient, type StripeRefund } from '../vendors/stripe.js';

const args = z
  .object({
    orderId: z.string().min(1),
    amountCents: z.number().int().positive(),
    currency: z.string().length(3),
    reason: z.string().min(1).max(500),
  })
  .strict();

export type RefundArgs = z.infer<typeof args>;
/** The refund's arguments, for an agent that extends them. */
export { args as refundArgs };

const refunded = (r: StripeRefund) => ({
  id: r.id,
  status: r.status ?? 'pending',
  amountCents: r.amount,
  currency: r.currency.toUpperCase(),
});

/**
 * Refunds an order's payment through Stripe: `orderId` is the order's payment at Stripe (its
 * PaymentIntent, `pi_...`), `metadata[action_id]` the ledger's action id and the Idempotency-Key
 * the action's key. A doubt is settled by re-sending the identical request with the same key inside
 * Stripe's 24 hours (the saved answer, `Idempotent-Replayed: true`), then by listing the payment's
 * refunds and matching `metadata.action_id`.
 */
export const refundTool = (stripe: StripeClient): WriteTool<RefundArgs> =>
  defineWriteTool<RefundArgs>({
    name: 'refund',
    description: 'Refund an order.',
    args,
    timeoutMs: 5000,
    service: {
      enforcesKey: true,
      reconcile: [{ kind: 'replay_same_key', windowMs: STRIPE_KEY_WINDOW_MS }, { kind: 'lookup' }],
    },
    // One refund per order, amount and currency: `eur` and `EUR` are one currency (ISO 4217 codes are
    // upper case); order ids keep their case (a service may tell them apart), spacing is dropped.
    identity: (a) => ({
      orderId: a.orderId.trim(),
      amountCents: a.amountCents,
      currency: a.currency.trim().toUpperCase(),
    }),
    async dispatch(a, _ctx, req) {
      const { refund, replayed } = await stripe.createRefund(
        {
          paymentIntent: a.orderId.trim(),
          amount: a.amountCents,
          currency: a.currency.trim(),
          reason: 'requested_by_customer',
          // Stripe caps a metadata value at 500 characters; the reason is for people reading the dashboard.
          metadata: { action_id: req.actionId, reason: a.reason.slice(0, 500) },
        },
        { idempotencyKey: req.idempotencyKey, timeoutMs: req.timeoutMs, signal: req.signal },
      );
      return { receipt: refund.id, output: refunded(refund), replayed };
    },
    async lookup(_ctx, req) {
      const a = args.parse(req.args);
      const mine = (
        await stripe.refundsForPayment(a.orderId.trim(), { timeoutMs: req.timeoutMs, signal: req.signal })
      ).filter((r) => r.metadata.action_id === req.actionId);
      if (mine.length === 0) return { status: 'absent', evidence: { query: 'payment_refunds', found: 0 } };
      const first = mine[mine.length - 1]!; // the list is newest first
      return {
        status: 'committed',
        receipt: first.id,
        output: refunded(first),
        evidence: { query: 'payment_refunds', refund: first.id, found: mine.length },
        effects: mine.length,
      };
    },
  });
