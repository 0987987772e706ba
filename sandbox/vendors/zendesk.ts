/**
 * Zendesk Support's ticket API, as documented (developer.zendesk.com, Tickets
 * and "Idempotency" in the API introduction):
 *  - POST /api/v2/tickets.json `{ticket: {...}}` -> 201 `{ticket, audit}`;
 *    `Idempotency-Key` up to 255 characters, kept 2 hours: a same-key,
 *    same-body request inside the window answers the original with
 *    `x-idempotency-lookup: hit` (a first use: `miss`); same key, other body:
 *    400 `IdempotentRequestError`;
 *  - GET /api/v2/tickets.json[?external_id=X] -> `{tickets, next_page, previous_page, count}`
 *    (external ids are not unique: several tickets may answer; the list may lag a create);
 *  - GET /api/v2/tickets/{id}.json -> `{ticket}` or 404 `RecordNotFound`;
 *  - PUT /api/v2/tickets/{id}.json `{ticket: {comment: {body, public}}}` -> 200 (adds a comment; no key);
 *  - GET /api/v2/tickets/{id}/comments.json -> `{comments}`;
 *  - auth: `Basic base64("{email}/token:{api_token}")` or `Bearer {oauth_access_token}`; else 401.
 * Not documented by Zendesk, chosen here: a same-key request while the first
 * is in progress answers 409; the sandbox accepts any well-formed credential.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { canonicalJson } from '../canonical.js';
import type { SandboxContext } from '../context.js';
import { createEffect, send, type Answer, type Dialect } from '../effects.js';
import { header, readBody } from '../http.js';

const PRIORITIES = new Set(['urgent', 'high', 'normal', 'low']);

const err = (status: number, error: string, description?: string, extra: Record<string, unknown> = {}): Answer => ({
  status,
  body: { error, ...(description !== undefined ? { description } : {}), ...extra },
});

export const zendeskErrors = {
  unauthorized: () => err(401, "Couldn't authenticate you"),
  notFound: () => err(404, 'RecordNotFound', 'Not found'),
  internal: () => err(500, 'InternalServerError', 'Something went wrong, please try again'),
};

/** Basic email/token:TOKEN or Bearer OAuth; any well-formed credential is accepted. */
export function zendeskAuthorized(req: IncomingMessage): boolean {
  const auth = header(req, 'authorization') ?? '';
  if (/^Bearer \S+$/.test(auth)) return true;
  const m = /^Basic (\S+)$/.exec(auth);
  if (!m) return false;
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  return /^[^\s/:@]+@[^\s/:]+\/token:\S+$/.test(decoded);
}

interface TicketInput {
  base: string;
  ticket: Record<string, unknown>;
  commentBody: string;
  publicComment: boolean;
}

function baseUrl(req: IncomingMessage): string {
  return `http://${header(req, 'host') ?? 'sandbox'}`;
}

export const zendeskTickets: Dialect<TicketInput> = {
  resource: 'tickets',
  maxKeyLength: 255,
  authorize: (req) => (zendeskAuthorized(req) ? undefined : zendeskErrors.unauthorized()),
  parse(raw, req) {
    let body: unknown;
    try {
      body = JSON.parse(raw.toString('utf8'));
    } catch {
      return err(400, 'InvalidJSON', 'The request body is not valid JSON');
    }
    const ticket = (body as { ticket?: unknown } | null)?.ticket;
    if (ticket === null || typeof ticket !== 'object' || Array.isArray(ticket))
      return err(400, 'ParameterMissing', 'Parameter ticket is required');
    const t = ticket as Record<string, unknown>;
    const comment = t.comment as { body?: unknown; html_body?: unknown; public?: unknown } | undefined;
    const text =
      typeof comment?.body === 'string'
        ? comment.body
        : typeof comment?.html_body === 'string'
          ? comment.html_body
          : '';
    if (text.trim() === '') {
      return err(422, 'RecordInvalid', 'Record validation errors', {
        details: { description: [{ description: 'Description: cannot be blank', error: 'BlankValue' }] },
      });
    }
    if (
      t.priority !== undefined &&
      t.priority !== null &&
      !(typeof t.priority === 'string' && PRIORITIES.has(t.priority))
    ) {
      return err(422, 'RecordInvalid', 'Record validation errors', {
        details: { priority: [{ description: 'Priority: is invalid', error: 'InvalidValue' }] },
      });
    }
    return {
      input: { base: baseUrl(req), ticket: t, commentBody: text, publicComment: comment?.public !== false },
      canon: canonicalJson(body),
    };
  },
  create(input, seq, nowMs) {
    const id = seq;
    const at = new Date(nowMs).toISOString().replace(/\.\d{3}Z$/, 'Z');
    const t = input.ticket;
    const ticket = {
      url: `${input.base}/api/v2/tickets/${id}.json`,
      id,
      external_id: typeof t.external_id === 'string' ? t.external_id : null,
      via: { channel: 'api', source: { from: {}, to: {}, rel: null } },
      created_at: at,
      updated_at: at,
      generated_timestamp: Math.floor(nowMs / 1000),
      type: typeof t.type === 'string' ? t.type : null,
      subject: typeof t.subject === 'string' ? t.subject : null,
      raw_subject: typeof t.subject === 'string' ? t.subject : null,
      description: input.commentBody,
      priority: typeof t.priority === 'string' ? t.priority : null,
      status: typeof t.status === 'string' ? t.status : 'new',
      recipient: null,
      requester_id: 1,
      submitter_id: 1,
      assignee_id: null,
      organization_id: null,
      group_id: null,
      collaborator_ids: [],
      follower_ids: [],
      email_cc_ids: [],
      problem_id: null,
      has_incidents: false,
      is_public: input.publicComment,
      due_at: null,
      tags: Array.isArray(t.tags) ? t.tags.filter((x): x is string => typeof x === 'string') : [],
      custom_fields: [],
      satisfaction_rating: null,
      sharing_agreement_ids: [],
      followup_ids: [],
      allow_channelback: false,
      allow_attachments: true,
      from_messaging_channel: false,
    };
    const audit = {
      id: id * 10,
      ticket_id: id,
      created_at: at,
      author_id: 1,
      events: [{ id: id * 10 + 1, type: 'Create' }],
    };
    return { id: String(id), resource: ticket, answer: { status: 201, body: { ticket, audit } } };
  },
  replay: (answer) => ({ ...answer, headers: { 'x-idempotency-lookup': 'hit' } }),
  firstHeaders: { 'x-idempotency-lookup': 'miss' },
  errors: {
    keyTooLong: (max) => err(400, 'InvalidValue', `Idempotency-Key must be at most ${max} characters`),
    keyReused: () => err(400, 'IdempotentRequestError', "Request parameters don't match the given idempotency key"),
    inProgress: () => err(409, 'Conflict', 'A request with this idempotency key is still being processed'),
    internal: zendeskErrors.internal,
    rateLimited: () => err(429, 'APIRateLimitExceeded', 'Number of allowed API requests per minute exceeded'),
    unavailable: () => err(503, 'ServiceUnavailable', 'Service temporarily unavailable'),
    tooLarge: () => err(413, 'RequestEntityTooLarge', 'Request body too large'),
  },
};

/** Routes under /api/v2 (path without the query). */
export async function handleZendesk(
  ctx: SandboxContext,
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  query: URLSearchParams,
): Promise<void> {
  const method = req.method ?? 'GET';
  const m = /^\/api\/v2\/tickets(?:\/(\d+))?(\/comments)?(?:\.json)?$/.exec(path);
  if (!m) return void send(res, zendeskErrors.notFound());
  const [, idText, comments] = m;
  if (idText === undefined) {
    if (method === 'POST') return createEffect(ctx, req, res, zendeskTickets);
    if (!zendeskAuthorized(req)) return void send(res, zendeskErrors.unauthorized());
    if (method === 'GET') return void listTickets(ctx, res, query);
    return void send(res, { status: 405, body: { error: 'MethodNotAllowed' }, headers: { allow: 'GET, POST' } });
  }
  if (!zendeskAuthorized(req)) return void send(res, zendeskErrors.unauthorized());
  const store = ctx.store;
  const record = store.get('tickets', idText);
  if (record === undefined) return void send(res, zendeskErrors.notFound());
  if (comments) {
    if (method !== 'GET')
      return void send(res, { status: 405, body: { error: 'MethodNotAllowed' }, headers: { allow: 'GET' } });
    const list = commentsOf(record);
    return void send(res, {
      status: 200,
      body: { comments: list, next_page: null, previous_page: null, count: list.length },
    });
  }
  if (method === 'GET') return void send(res, { status: 200, body: { ticket: record.resource } });
  if (method === 'PUT') return addComment(ctx, req, res, record);
  send(res, { status: 405, body: { error: 'MethodNotAllowed' }, headers: { allow: 'GET, PUT' } });
}

function listTickets(ctx: SandboxContext, res: ServerResponse, query: URLSearchParams): void {
  const externalId = query.get('external_id');
  if (ctx.faults.fire('tickets', ['no_lookup']) !== undefined) return send(res, zendeskErrors.internal());
  let tickets = ctx.store.all('tickets').map((r) => r.resource);
  if (externalId !== null) {
    tickets = tickets.filter((t) => t.external_id === externalId);
    // The list is served from an index that can lag a create: a ticket that exists may not answer yet.
    if (ctx.faults.fire('tickets', ['list_lag']) !== undefined) tickets = [];
  }
  send(res, { status: 200, body: { tickets, next_page: null, previous_page: null, count: tickets.length } });
}

/** PUT with `ticket.comment`: one more comment (Zendesk takes no Idempotency-Key here: a repeat is a second comment). */
async function addComment(
  ctx: SandboxContext,
  req: IncomingMessage,
  res: ServerResponse,
  record: TicketRecord,
): Promise<void> {
  let body: { ticket?: { comment?: { body?: unknown; public?: unknown } } };
  try {
    body = JSON.parse((await readBody(req)).toString('utf8')) as typeof body;
  } catch {
    return void send(res, err(400, 'InvalidJSON', 'The request body is not valid JSON'));
  }
  const comment = body?.ticket?.comment;
  if (typeof comment?.body !== 'string' || comment.body.trim() === '') {
    return void send(
      res,
      err(422, 'RecordInvalid', 'Record validation errors', {
        details: { base: [{ description: 'Comment: cannot be blank', error: 'BlankValue' }] },
      }),
    );
  }
  const at = new Date(ctx.store.now()).toISOString().replace(/\.\d{3}Z$/, 'Z');
  const comments = commentsOf(record);
  comments.push({
    id: Number(record.id) * 1000 + comments.length + 1,
    type: 'Comment',
    author_id: 1,
    body: comment.body,
    plain_body: comment.body,
    public: comment.public !== false,
    created_at: at,
  });
  record.resource.updated_at = at;
  send(res, {
    status: 200,
    body: {
      ticket: record.resource,
      audit: {
        id: Number(record.id) * 10 + comments.length,
        ticket_id: Number(record.id),
        created_at: at,
        author_id: 1,
        events: [{ type: 'Comment', body: comment.body, public: comment.public !== false }],
      },
    },
  });
}

type TicketRecord = NonNullable<ReturnType<SandboxContext['store']['get']>>;

/** The ticket's comments; the first is the one it was created with (its description). */
function commentsOf(record: TicketRecord): Record<string, unknown>[] {
  const t = record.resource;
  return (record.comments ??= [
    {
      id: Number(record.id) * 1000,
      type: 'Comment',
      author_id: 1,
      body: t.description,
      plain_body: t.description,
      public: t.is_public,
      created_at: t.created_at,
    },
  ]);
}
