/**
 * Resend's email API, as documented (resend.com/docs: Send Email, Retrieve
 * Email, Idempotency Keys, Errors):
 *  - POST /emails `{from, to, subject, html | text, cc?, bcc?, reply_to?, headers?, tags?}` -> 200 `{id}`;
 *  - `Idempotency-Key` 1-256 characters, kept 24 hours: the same key and body
 *    answer the original response and send nothing (Resend documents no replay
 *    header: a replay looks exactly like the first answer); the same key with
 *    another body: 409 `invalid_idempotent_request`; while the first request is
 *    in progress: 409 `concurrent_idempotent_requests`; a bad key: 400 `invalid_idempotency_key`;
 *  - GET /emails/{id} -> `{object: "email", id, to, from, created_at, subject, html, text, ..., last_event}`;
 *  - errors are `{statusCode, name, message}`; auth `Authorization: Bearer re_...`
 *    (missing: 401 `missing_api_key`; malformed: 403 `invalid_api_key`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { canonicalJson } from '../canonical.js';
import type { SandboxContext } from '../context.js';
import { createEffect, send, type Answer, type Dialect } from '../effects.js';
import { header } from '../http.js';

const err = (statusCode: number, name: string, message: string): Answer => ({
  status: statusCode,
  body: { statusCode, name, message },
});

function authorize(req: IncomingMessage): Answer | undefined {
  const auth = header(req, 'authorization');
  if (auth === null) {
    return err(
      401,
      'missing_api_key',
      'Missing API key in the authorization header. Include the following header Authorization: Bearer YOUR_API_KEY in the request.',
    );
  }
  return /^Bearer re_\S+$/.test(auth) ? undefined : err(403, 'invalid_api_key', 'API key is invalid');
}

interface EmailInput {
  body: Record<string, unknown>;
  to: string[];
}

const list = (v: unknown): string[] | null =>
  v === undefined || v === null
    ? null
    : typeof v === 'string'
      ? [v]
      : Array.isArray(v) && v.every((x) => typeof x === 'string')
        ? v
        : null;

export const resendEmails: Dialect<EmailInput> = {
  resource: 'emails',
  maxKeyLength: 256,
  authorize,
  parse(raw) {
    let body: unknown;
    try {
      body = JSON.parse(raw.toString('utf8'));
    } catch {
      return err(422, 'validation_error', 'Invalid JSON body');
    }
    if (body === null || typeof body !== 'object' || Array.isArray(body))
      return err(422, 'validation_error', 'Invalid JSON body');
    const b = body as Record<string, unknown>;
    if (typeof b.from !== 'string' || b.from === '') return err(422, 'missing_required_field', 'Missing `from` field.');
    const to = list(b.to);
    if (to === null || to.length === 0) return err(422, 'missing_required_field', 'Missing `to` field.');
    if (to.length > 50) return err(422, 'validation_error', 'The `to` field must contain at most 50 addresses.');
    if (typeof b.subject !== 'string' || b.subject === '')
      return err(422, 'missing_required_field', 'Missing `subject` field.');
    if (typeof b.html !== 'string' && typeof b.text !== 'string')
      return err(422, 'missing_required_field', 'Missing `html` or `text` field.');
    return { input: { body: b, to }, canon: canonicalJson(b) };
  },
  create(input, seq, nowMs) {
    // A UUID-shaped id derived from the sequence: a reset sandbox repeats its ids, like its other records.
    const id = `4ef9a417-02e9-4d39-ad75-${String(seq).padStart(12, '0')}`;
    const b = input.body;
    const email = {
      object: 'email',
      id,
      to: input.to,
      from: b.from,
      created_at: new Date(nowMs).toISOString().replace('T', ' ').replace('Z', '+00'),
      subject: b.subject,
      html: typeof b.html === 'string' ? b.html : null,
      text: typeof b.text === 'string' ? b.text : null,
      bcc: list(b.bcc),
      cc: list(b.cc),
      reply_to: list(b.reply_to),
      last_event: 'delivered',
      ...(Array.isArray(b.tags) ? { tags: b.tags } : {}),
    };
    return { id, resource: email, answer: { status: 200, body: { id } } };
  },
  replay: (answer) => ({ ...answer }),
  errors: {
    keyTooLong: () => err(400, 'invalid_idempotency_key', 'The key must be between 1-256 chars.'),
    keyReused: () =>
      err(
        409,
        'invalid_idempotent_request',
        'Same idempotency key used with a different request payload. Change your idempotency key or payload.',
      ),
    inProgress: () =>
      err(
        409,
        'concurrent_idempotent_requests',
        'Same idempotency key used while original request is still in progress. Try the request again later.',
      ),
    internal: () => err(500, 'application_error', 'An unexpected error occurred.'),
    rateLimited: () => err(429, 'rate_limit_exceeded', 'Too many requests. You can only make 2 requests per second.'),
    unavailable: () => err(503, 'service_unavailable', 'The service is temporarily unavailable.'),
    tooLarge: () => err(413, 'validation_error', 'Request body too large.'),
  },
};

/** POST /emails and GET /emails/{id}. */
export async function handleResend(
  ctx: SandboxContext,
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
): Promise<void> {
  const method = req.method ?? 'GET';
  if (path === '/emails') {
    if (method === 'POST') return createEffect(ctx, req, res, resendEmails);
    return void send(res, { ...err(405, 'method_not_allowed', 'Method not allowed'), headers: { allow: 'POST' } });
  }
  const m = /^\/emails\/([^/]+)$/.exec(path);
  if (!m) return void send(res, err(404, 'not_found', 'The requested endpoint does not exist.'));
  const denied = authorize(req);
  if (denied) return void send(res, denied);
  if (method !== 'GET')
    return void send(res, { ...err(405, 'method_not_allowed', 'Method not allowed'), headers: { allow: 'GET' } });
  const record = ctx.store.get('emails', decodeURIComponent(m[1]!));
  if (record === undefined) return void send(res, err(404, 'not_found', 'Email not found'));
  send(res, { status: 200, body: record.resource });
}
