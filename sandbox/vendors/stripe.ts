/**
 * Stripe's refunds API, as documented (docs.stripe.com/api/refunds, Idempotent
 * requests, Errors):
 *  - POST /v1/refunds, form-encoded: `payment_intent` or `charge`, `amount`,
 *    `currency`, `reason` (duplicate | fraudulent | requested_by_customer),
 *    `metadata[key]=value` -> 200 a refund object;
 *  - `Idempotency-Key` up to 255 characters, kept at least 24 hours: the same
 *    key and parameters answer the saved response with `Idempotent-Replayed: true`;
 *    other parameters: 400 `idempotency_error`; while the first is in progress:
 *    409 `idempotency_key_in_use`;
 *  - GET /v1/refunds?payment_intent=|charge=&limit= -> `{object: "list", data, has_more, url}` (newest first);
 *  - GET /v1/refunds/{id} -> the refund, or 404 `resource_missing`;
 *  - errors are `{error: {type, code?, param?, message}}`; 429 `rate_limit` (the
 *    sandbox adds Retry-After; Stripe itself does not document one);
 *  - auth: `Authorization: Bearer sk_...` or Basic with the key as user name; else 401.
 * The sandbox does not model payments: any payment_intent or charge is refundable, for any amount.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { SandboxContext } from '../context.js';
import { createEffect, send, type Answer, type Dialect } from '../effects.js';
import { header } from '../http.js';

const err = (status: number, type: string, message: string, extra: { code?: string; param?: string } = {}): Answer => ({
  status,
  body: { error: { type, ...extra, message } },
});

const KEY = /^(sk|rk)_(test|live)_\S+$/;

function authorize(req: IncomingMessage): Answer | undefined {
  const auth = header(req, 'authorization');
  if (auth === null) {
    return err(
      401,
      'invalid_request_error',
      "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY').",
    );
  }
  const bearer = /^Bearer (\S+)$/.exec(auth)?.[1];
  const basic = /^Basic (\S+)$/.exec(auth)?.[1];
  const key = bearer ?? (basic ? Buffer.from(basic, 'base64').toString('utf8').replace(/:$/, '') : '');
  return KEY.test(key)
    ? undefined
    : err(401, 'invalid_request_error', `Invalid API Key provided: ${key.slice(0, 8)}****`, {
        code: 'api_key_invalid',
      });
}

const PARAMS = new Set(['payment_intent', 'charge', 'amount', 'currency', 'reason', 'instructions_email']);
const REASONS = new Set(['duplicate', 'fraudulent', 'requested_by_customer']);

interface RefundInput {
  paymentIntent: string | null;
  charge: string | null;
  amount: number | null;
  currency: string;
  reason: string | null;
  metadata: Record<string, string>;
}

const pad = (n: number, w: number) => String(n).padStart(w, '0');

export const stripeRefunds: Dialect<RefundInput> = {
  resource: 'refunds',
  maxKeyLength: 255,
  authorize,
  parse(raw) {
    const form = new URLSearchParams(raw.toString('utf8'));
    const metadata: Record<string, string> = {};
    for (const [k, v] of form) {
      const meta = /^metadata\[([^\]]{1,40})\]$/.exec(k);
      if (meta) {
        if (v.length > 500)
          return err(
            400,
            'invalid_request_error',
            `Metadata values can have up to 500 characters, but you passed in a value that is ${v.length} characters.`,
            { param: k },
          );
        metadata[meta[1]!] = v;
      } else if (!PARAMS.has(k)) {
        return err(400, 'invalid_request_error', `Received unknown parameter: ${k}`, {
          code: 'parameter_unknown',
          param: k,
        });
      }
    }
    const paymentIntent = form.get('payment_intent');
    const charge = form.get('charge');
    if (!paymentIntent && !charge) {
      return err(
        400,
        'invalid_request_error',
        'One of the following params should be provided for this request: payment_intent or charge.',
        { code: 'parameter_missing' },
      );
    }
    const amountText = form.get('amount');
    const amount = amountText === null ? null : Number(amountText);
    if (amount !== null && !(Number.isSafeInteger(amount) && amount > 0 && /^\d+$/.test(amountText!))) {
      return err(400, 'invalid_request_error', `Invalid integer: ${amountText}`, {
        code: 'parameter_invalid_integer',
        param: 'amount',
      });
    }
    const reason = form.get('reason');
    if (reason !== null && !REASONS.has(reason)) {
      return err(
        400,
        'invalid_request_error',
        'Invalid reason: must be one of duplicate, fraudulent, or requested_by_customer',
        { code: 'parameter_invalid_string', param: 'reason' },
      );
    }
    const currency = (form.get('currency') ?? 'usd').toLowerCase();
    // Stripe compares the request's parameters, whatever their order.
    const canon = JSON.stringify([...form].sort(([a, x], [b, y]) => (a === b ? (x < y ? -1 : 1) : a < b ? -1 : 1)));
    return { input: { paymentIntent, charge, amount, currency, reason, metadata }, canon };
  },
  create(input, seq, nowMs) {
    const id = `re_sbx${pad(seq, 18)}`;
    const refund = {
      id,
      object: 'refund',
      amount: input.amount ?? 1000,
      balance_transaction: `txn_sbx${pad(seq, 17)}`,
      charge: input.charge ?? `ch_sbx${pad(seq, 18)}`,
      created: Math.floor(nowMs / 1000),
      currency: input.currency,
      destination_details: {
        card: {
          reference: null,
          reference_status: 'pending',
          reference_type: 'acquirer_reference_number',
          type: 'refund',
        },
        type: 'card',
      },
      metadata: input.metadata,
      payment_intent: input.paymentIntent,
      reason: input.reason,
      receipt_number: null,
      source_transfer_reversal: null,
      status: 'succeeded',
      transfer_reversal: null,
    };
    return { id, resource: refund, answer: { status: 200, body: refund } };
  },
  replay: (answer) => ({ ...answer, headers: { 'idempotent-replayed': 'true' } }),
  errors: {
    keyTooLong: (max) => err(400, 'invalid_request_error', `Idempotency-Key must be at most ${max} characters.`),
    keyReused: (key) =>
      err(
        400,
        'idempotency_error',
        `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${key}' if you meant to execute a different request.`,
      ),
    inProgress: (key) =>
      err(
        409,
        'invalid_request_error',
        `There is currently another in-progress request using this Idempotent Key (that probably means you submitted twice, and the other request is still going through): ${key}. Please try again later.`,
        { code: 'idempotency_key_in_use' },
      ),
    internal: () => err(500, 'api_error', 'An unknown error occurred'),
    rateLimited: () =>
      err(
        429,
        'invalid_request_error',
        'Request rate limit exceeded. Learn more about rate limits here https://stripe.com/docs/rate-limits.',
        { code: 'rate_limit' },
      ),
    unavailable: () => err(503, 'api_error', 'The service is temporarily unavailable'),
    tooLarge: () => err(413, 'invalid_request_error', 'Request body too large'),
  },
};

/** /v1/refunds and /v1/refunds/{id}. */
export async function handleStripe(
  ctx: SandboxContext,
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  query: URLSearchParams,
): Promise<void> {
  const method = req.method ?? 'GET';
  if (path === '/v1/refunds') {
    if (method === 'POST') return createEffect(ctx, req, res, stripeRefunds);
    const denied = authorize(req);
    if (denied) return void send(res, denied);
    if (method !== 'GET')
      return void send(res, {
        ...err(405, 'invalid_request_error', 'Method not allowed'),
        headers: { allow: 'GET, POST' },
      });
    if (ctx.faults.fire('refunds', ['no_lookup']) !== undefined) return void send(res, stripeRefunds.errors.internal());
    const pi = query.get('payment_intent');
    const charge = query.get('charge');
    const limit = Math.min(100, Math.max(1, Number(query.get('limit') ?? 10) || 10));
    const all = ctx.store
      .all('refunds')
      .map((r) => r.resource)
      .filter((r) => (pi === null || r.payment_intent === pi) && (charge === null || r.charge === charge))
      .reverse();
    return void send(res, {
      status: 200,
      body: { object: 'list', data: all.slice(0, limit), has_more: all.length > limit, url: '/v1/refunds' },
    });
  }
  const m = /^\/v1\/refunds\/([^/]+)$/.exec(path);
  const denied = authorize(req);
  if (denied) return void send(res, denied);
  if (!m) return void send(res, err(404, 'invalid_request_error', `Unrecognized request URL (${method}: ${path}).`));
  if (method !== 'GET')
    return void send(res, { ...err(405, 'invalid_request_error', 'Method not allowed'), headers: { allow: 'GET' } });
  const record = ctx.store.get('refunds', decodeURIComponent(m[1]!));
  if (record === undefined)
    return void send(
      res,
      err(404, 'invalid_request_error', `No such refund: '${m[1]}'`, { code: 'resource_missing', param: 'id' }),
    );
  send(res, { status: 200, body: record.resource });
}
