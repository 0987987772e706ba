/**
 * Zendesk Support tickets over HTTP (developer.zendesk.com/api-reference/ticketing):
 * create with an `Idempotency-Key` and `external_id` = the ledger's action id,
 * list by external_id (how a lost create is found), read one, add a comment.
 *
 * How it settles a doubt (`service.reconcile` of the create_ticket tool): look
 * the ticket up by external_id; nothing found proves nothing (the list can lag
 * a create, and the request may still land), so inside the key's 2-hour window
 * the identical create is re-sent with the same key: Zendesk answers a ticket it
 * already created with `x-idempotency-lookup: hit` and creates nothing. Past
 * the window only the lookup is left, then a person.
 *
 * Not Zendesk's official client (node-zendesk): it sets no per-request
 * Idempotency-Key and does not expose the `x-idempotency-lookup` header, and
 * its request errors do not tell "never sent" (connection refused) from
 * "response lost" (reset, timeout); src/core/httpJson.ts does.
 */
import { z } from 'zod';
import { httpJson, type HttpResult } from '../../../core/httpJson.js';
import { basic, malformed, vendorError } from './errors.js';

/** Zendesk keeps an Idempotency-Key 2 hours (API introduction, "Idempotency"). */
export const ZENDESK_KEY_WINDOW_MS = 2 * 3600_000;

export interface ZendeskOptions {
  /** `https://{subdomain}.zendesk.com` (no trailing slash); the sandbox's URL in development. */
  baseUrl: string;
  /** API token (`{email}/token:{token}`, basic) or an OAuth access token (Bearer). */
  auth: { kind: 'api_token'; email: string; token: string } | { kind: 'oauth'; accessToken: string };
  /** Per request; the ledger's dispatch gives its own (at most the run's time left). */
  timeoutMs: number;
}

const ticketSchema = z
  .object({ id: z.number().int(), external_id: z.string().nullable().optional(), status: z.string() })
  .loose();
export type ZendeskTicket = z.infer<typeof ticketSchema>;

export interface ZendeskTicketCreate {
  subject: string;
  comment: { body: string; public: boolean };
  priority?: 'low' | 'normal' | 'high' | 'urgent';
  external_id: string;
  tags?: string[];
}

interface Call {
  timeoutMs?: number;
  signal: AbortSignal;
}

const errorCode = (body: unknown): string => {
  const e = (body as { error?: unknown } | undefined)?.error;
  return typeof e === 'string' ? e.slice(0, 60) : 'error';
};

export class ZendeskClient {
  constructor(private readonly o: ZendeskOptions) {}

  private headers(): Record<string, string> {
    const a = this.o.auth;
    return { authorization: a.kind === 'oauth' ? `Bearer ${a.accessToken}` : basic(`${a.email}/token`, a.token) };
  }

  private url(path: string): string {
    return `${this.o.baseUrl}/api/v2${path}`;
  }

  /**
   * POST /api/v2/tickets.json. `replayed`: Zendesk answered from its idempotency store
   * (`x-idempotency-lookup: hit`): the ticket existed already, nothing was created.
   */
  async createTicket(
    ticket: ZendeskTicketCreate,
    req: Call & { idempotencyKey: string },
  ): Promise<{ ticket: ZendeskTicket; replayed: boolean }> {
    const res = await httpJson(this.url('/tickets.json'), {
      method: 'POST',
      headers: { ...this.headers(), 'idempotency-key': req.idempotencyKey },
      body: { ticket },
      timeoutMs: req.timeoutMs ?? this.o.timeoutMs,
      signal: req.signal,
    });
    if (res.status === 201 || res.status === 200) {
      return { ticket: this.ticketOf(res, 'create'), replayed: res.headers.get('x-idempotency-lookup') === 'hit' };
    }
    const code = errorCode(res.body);
    if (res.status === 400 && code === 'IdempotentRequestError')
      throw vendorError('zendesk', 'create ticket', res.status, code, 'conflict');
    if (res.status === 409) throw vendorError('zendesk', 'create ticket', res.status, code, 'in_progress');
    throw vendorError('zendesk', 'create ticket', res.status, code, 'rejected');
  }

  /** GET /api/v2/tickets.json?external_id=: every ticket carrying it (external ids are not unique). */
  async ticketsByExternalId(externalId: string, call: Call): Promise<ZendeskTicket[]> {
    const res = await httpJson(this.url(`/tickets.json?external_id=${encodeURIComponent(externalId)}`), {
      method: 'GET',
      headers: this.headers(),
      timeoutMs: call.timeoutMs ?? this.o.timeoutMs,
      signal: call.signal,
    });
    if (res.status !== 200) throw vendorError('zendesk', 'list tickets', res.status, errorCode(res.body), 'rejected');
    const parsed = z.object({ tickets: z.array(ticketSchema) }).safeParse(res.body);
    if (!parsed.success) throw malformed('zendesk', 'list tickets', res.status);
    return parsed.data.tickets;
  }

  /** GET /api/v2/tickets/{id}.json; undefined when Zendesk answers 404. */
  async getTicket(id: number, call: Call): Promise<ZendeskTicket | undefined> {
    const res = await httpJson(this.url(`/tickets/${id}.json`), {
      method: 'GET',
      headers: this.headers(),
      timeoutMs: call.timeoutMs ?? this.o.timeoutMs,
      signal: call.signal,
    });
    if (res.status === 404) return undefined;
    if (res.status !== 200) throw vendorError('zendesk', 'show ticket', res.status, errorCode(res.body), 'rejected');
    return this.ticketOf(res, 'show ticket');
  }

  /**
   * PUT /api/v2/tickets/{id}.json with `ticket.comment`. Zendesk takes no Idempotency-Key
   * here: a repeat adds a second comment, so a caller that must not repeat it goes through the ledger.
   */
  async addComment(id: number, comment: { body: string; public: boolean }, call: Call): Promise<ZendeskTicket> {
    const res = await httpJson(this.url(`/tickets/${id}.json`), {
      method: 'PUT',
      headers: this.headers(),
      body: { ticket: { comment } },
      timeoutMs: call.timeoutMs ?? this.o.timeoutMs,
      signal: call.signal,
    });
    if (res.status !== 200) throw vendorError('zendesk', 'add comment', res.status, errorCode(res.body), 'rejected');
    return this.ticketOf(res, 'add comment');
  }

  private ticketOf(res: HttpResult, what: string): ZendeskTicket {
    const parsed = z.object({ ticket: ticketSchema }).safeParse(res.body);
    if (!parsed.success) throw malformed('zendesk', what, res.status);
    return parsed.data.ticket;
  }
}
