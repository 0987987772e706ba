/**
 * Resend emails over HTTP (resend.com/docs/api-reference): send with an
 * `Idempotency-Key`, read one by id.
 *
 * How it settles a doubt (the send_email tool): Resend offers no lookup by key.
 * Its documented recovery is to send the same request with the same key inside
 * 24 hours: it answers the original response and sends nothing. So the ledger
 * re-sends the identical request (same key, same body: the body is built from
 * the recorded arguments and this configuration only) and the answer is the
 * outcome. Past the window a re-send could be a second email: a person decides.
 * Resend documents no replay marker, so a replay cannot be told from a first
 * send here (the duplicate-write metric sees Zendesk's and Stripe's markers only).
 *
 * Not Resend's official SDK (`resend`): it has no request timeout option, and it
 * turns every fetch failure into one `application_error` result, so a request
 * that never left (connection refused) and one whose response was lost look the
 * same; src/core/httpJson.ts tells them apart.
 */
import { z } from 'zod';
import { httpJson } from '../../../core/httpJson.js';
import { malformed, vendorError } from './errors.js';

/** Resend keeps an Idempotency-Key 24 hours (docs: "Idempotency Keys"). */
export const RESEND_KEY_WINDOW_MS = 24 * 3600_000;

export interface ResendOptions {
  /** `https://api.resend.com`; the sandbox's URL in development. */
  baseUrl: string;
  /** `re_...` */
  apiKey: string;
  /** The sender, on a domain verified at Resend: `Support <support@example.com>`. */
  from: string;
  timeoutMs: number;
}

export interface ResendEmail {
  to: string[];
  subject: string;
  text?: string;
  html?: string;
  tags?: { name: string; value: string }[];
}

interface Call {
  timeoutMs?: number;
  signal: AbortSignal;
}

const errorName = (body: unknown): string => {
  const n = (body as { name?: unknown } | undefined)?.name;
  return typeof n === 'string' ? n.slice(0, 60) : 'error';
};

export class ResendClient {
  constructor(private readonly o: ResendOptions) {}

  private headers(): Record<string, string> {
    return { authorization: `Bearer ${this.o.apiKey}` };
  }

  /** The exact body POST /emails sends for `email` (a replay must send the same one). */
  body(email: ResendEmail): Record<string, unknown> {
    return { from: this.o.from, ...email };
  }

  /** POST /emails -> the email id. */
  async send(email: ResendEmail, req: Call & { idempotencyKey: string }): Promise<{ id: string }> {
    const res = await httpJson(`${this.o.baseUrl}/emails`, {
      method: 'POST',
      headers: { ...this.headers(), 'idempotency-key': req.idempotencyKey },
      body: this.body(email),
      timeoutMs: req.timeoutMs ?? this.o.timeoutMs,
      signal: req.signal,
    });
    if (res.status === 200 || res.status === 201) {
      const parsed = z.object({ id: z.string().min(1) }).safeParse(res.body);
      if (!parsed.success) throw malformed('resend', 'send email', res.status);
      return parsed.data;
    }
    const name = errorName(res.body);
    if (res.status === 409 && name === 'invalid_idempotent_request')
      throw vendorError('resend', 'send email', res.status, name, 'conflict');
    if (res.status === 409) throw vendorError('resend', 'send email', res.status, name, 'in_progress');
    throw vendorError('resend', 'send email', res.status, name, 'rejected');
  }

  /** GET /emails/{id}; undefined on 404. */
  async get(id: string, call: Call): Promise<Record<string, unknown> | undefined> {
    const res = await httpJson(`${this.o.baseUrl}/emails/${encodeURIComponent(id)}`, {
      method: 'GET',
      headers: this.headers(),
      timeoutMs: call.timeoutMs ?? this.o.timeoutMs,
      signal: call.signal,
    });
    if (res.status === 404) return undefined;
    if (res.status !== 200) throw vendorError('resend', 'get email', res.status, errorName(res.body), 'rejected');
    const parsed = z
      .object({ object: z.literal('email'), id: z.string() })
      .loose()
      .safeParse(res.body);
    if (!parsed.success) throw malformed('resend', 'get email', res.status);
    return parsed.data;
  }
}
