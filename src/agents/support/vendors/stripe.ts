/**
 * Stripe refunds over HTTP (docs.stripe.com/api/refunds): create, form-encoded,
 * with an `Idempotency-Key` and `metadata[action_id]` = the ledger's action id;
 * list a payment's refunds.
 *
 * How it settles a doubt (the refund tool): inside the key's 24 hours, re-send
 * the identical request with the same key: Stripe answers the saved response
 * (`Idempotent-Replayed: true`) and refunds nothing more; then, or past the
 * window, list the payment's refunds and match `metadata.action_id`. Nothing
 * found past the window: a person decides.
 *
 * Not Stripe's official client (`stripe`): it can set the key, turn retries off
 * (maxNetworkRetries: 0) and set a timeout, but it raises one
 * StripeConnectionError for a request that never left and for one whose
 * response was lost, and the ledger must tell them apart; src/core/httpJson.ts does.
 */
import { z } from 'zod';
import { httpJson } from '../../../core/httpJson.js';
import { malformed, vendorError } from './errors.js';

/** Stripe keeps an Idempotency-Key at least 24 hours (docs: "Idempotent requests"). */
export const STRIPE_KEY_WINDOW_MS = 24 * 3600_000;

export interface StripeOptions {
  /** `https://api.stripe.com`; the sandbox's URL in development. */
  baseUrl: string;
  /** `sk_live_...` / `sk_test_...` (or a restricted `rk_` key allowed to write refunds). */
  apiKey: string;
  timeoutMs: number;
}

const refundSchema = z
  .object({
    id: z.string().startsWith('re_'),
    object: z.literal('refund'),
    amount: z.number().int(),
    currency: z.string(),
    status: z.string().nullable(),
    payment_intent: z.string().nullable().optional(),
    metadata: z.record(z.string(), z.string()).default({}),
  })
  .loose();
export type StripeRefund = z.infer<typeof refundSchema>;

export interface StripeRefundCreate {
  paymentIntent: string;
  amount: number;
  currency: string;
  reason?: 'duplicate' | 'fraudulent' | 'requested_by_customer';
  metadata: Record<string, string>;
}

interface Call {
  timeoutMs?: number;
  signal: AbortSignal;
}

const errorOf = (body: unknown): { type: string; code: string } => {
  const e = (body as { error?: { type?: unknown; code?: unknown } } | undefined)?.error;
  return { type: typeof e?.type === 'string' ? e.type : 'error', code: typeof e?.code === 'string' ? e.code : '' };
};

export class StripeClient {
  constructor(private readonly o: StripeOptions) {}

  private headers(): Record<string, string> {
    return { authorization: `Bearer ${this.o.apiKey}` };
  }

  /** The form POST /v1/refunds sends (a replay must send the same parameters). */
  form(r: StripeRefundCreate): URLSearchParams {
    const f = new URLSearchParams({
      payment_intent: r.paymentIntent,
      amount: String(r.amount),
      currency: r.currency.toLowerCase(),
    });
    if (r.reason) f.set('reason', r.reason);
    for (const [k, v] of Object.entries(r.metadata)) f.set(`metadata[${k}]`, v);
    return f;
  }

  /** POST /v1/refunds. `replayed`: Stripe answered a saved response (`Idempotent-Replayed: true`). */
  async createRefund(
    r: StripeRefundCreate,
    req: Call & { idempotencyKey: string },
  ): Promise<{ refund: StripeRefund; replayed: boolean }> {
    const res = await httpJson(`${this.o.baseUrl}/v1/refunds`, {
      method: 'POST',
      headers: { ...this.headers(), 'idempotency-key': req.idempotencyKey },
      form: this.form(r),
      timeoutMs: req.timeoutMs ?? this.o.timeoutMs,
      signal: req.signal,
    });
    if (res.status === 200) {
      const parsed = refundSchema.safeParse(res.body);
      if (!parsed.success) throw malformed('stripe', 'create refund', res.status);
      return { refund: parsed.data, replayed: res.headers.get('idempotent-replayed') === 'true' };
    }
    const e = errorOf(res.body);
    const code = e.code || e.type;
    if (e.type === 'idempotency_error' && res.status === 400)
      throw vendorError('stripe', 'create refund', res.status, code, 'conflict');
    if (res.status === 409) throw vendorError('stripe', 'create refund', res.status, code, 'in_progress');
    throw vendorError('stripe', 'create refund', res.status, code, 'rejected');
  }

  /** GET /v1/refunds?payment_intent=: the payment's refunds, newest first (up to 100). */
  async refundsForPayment(paymentIntent: string, call: Call): Promise<StripeRefund[]> {
    const res = await httpJson(
      `${this.o.baseUrl}/v1/refunds?payment_intent=${encodeURIComponent(paymentIntent)}&limit=100`,
      {
        method: 'GET',
        headers: this.headers(),
        timeoutMs: call.timeoutMs ?? this.o.timeoutMs,
        signal: call.signal,
      },
    );
    if (res.status !== 200) {
      const e = errorOf(res.body);
      throw vendorError('stripe', 'list refunds', res.status, e.code || e.type, 'rejected');
    }
    const parsed = z.object({ object: z.literal('list'), data: z.array(refundSchema) }).safeParse(res.body);
    if (!parsed.success) throw malformed('stripe', 'list refunds', res.status);
    return parsed.data.data;
  }
}
