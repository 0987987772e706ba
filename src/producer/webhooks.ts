/**
 * Signed ticket webhooks that start runs: POST /webhooks/tickets and
 * POST /webhooks/zendesk, tenant from `?tenant=` or the path
 * (/webhooks/<kind>/<tenant>), per-tenant secret from WEBHOOK_SECRETS.
 *
 * Order at the edge: signature over the raw bytes -> strict body schema ->
 * event-id dedupe (SET NX, 24 h) -> startRun. The event id is the run's intake
 * event: the ticket is the subject, so a later event on the same ticket (a
 * customer's reply: a new event id, or a Zendesk event with a new comment id)
 * starts a follow-up run linked to the ticket's latest run, while the same
 * event twice is one run (the run id derives from tenant, ticket and event).
 * startRun is idempotent on the event anyway, so if the process dies after the
 * dedupe record and before the run exists, the sender's retry is answered
 * `duplicate` with the run id while the run may be missing: the dedupe record
 * is therefore deleted when startRun fails, and written with the run id it is for.
 *
 * An event's identity comes only from what the signature covers: a header the
 * signature does not cover (Zendesk's invocation id, say) can be changed by
 * anyone replaying a captured request, so it never names an event. The dedupe
 * record outlives the replay window (twice the tolerance), so a signed request
 * is refused as stale before its record can expire.
 *
 * These routes need the raw body, so they are mounted before the API's JSON
 * parser (see src/http/fullApi.ts).
 */
import { createHash } from 'node:crypto';
import express, { Router, type Response } from 'express';
import { z } from 'zod';
import type { EngineContext } from '../runs/engineContext.js';
import { BODY_LIMIT, bodyIllFormed, bodyTooDeep, illFormedStringPath, nestedDeeperThan } from './bodyLimits.js';
import { InvalidRunRequest, runIdOf, startRun } from './intake.js';
import { ticketSchema, type Ticket } from '../agents/support/ticket.js';
import { invalid, param } from './fieldErrors.js';
import { checkSignature, SIGNATURE_HEADER, TIMESTAMP_HEADER } from './webhookSignature.js';
import { eventKeySchema } from '../runs/spec.js';

const EVENT_TTL_MS = 24 * 3600_000;
const TENANT = /^[a-z0-9][a-z0-9_-]{0,62}$/i;

export const ticketEventSchema = z.object({ v: z.literal(1), eventId: eventKeySchema, ticket: ticketSchema }).strict();

/** The JSON a Zendesk webhook is configured to send (Zendesk placeholders fill it). */
export const zendeskEventSchema = z
  .object({
    eventId: eventKeySchema.optional(),
    /** A ticket-updated / comment-added event carries the comment: its id names the event, its body is the message. */
    comment: z
      .object({
        id: z.union([
          z.string().regex(/^[\w-]{1,100}$/, '1 to 100 letters, digits, _ or -'),
          z.number().int().nonnegative(),
        ]),
        body: z.string().min(1).max(200_000),
      })
      .strict()
      .optional(),
    ticket: z
      .object({
        id: z.union([z.string().min(1).max(200), z.number().int().nonnegative()]),
        subject: z.string().min(1).max(1000),
        description: z.string().max(200_000),
        requester: z.object({ email: z.string().email(), name: z.string().min(1).max(200) }).strict(),
      })
      .strict(),
  })
  .strict();

type Parsed =
  | { ok: true; eventId: string; ticket: Ticket }
  | { ok: false; error: z.ZodError }
  | { ok: false; json: false }
  | { ok: false; deep: true }
  | { ok: false; illFormed: string };

const NOT_JSON = Symbol('not JSON');
const TOO_DEEP = Symbol('too deep');

function parseJson(raw: Buffer): unknown {
  let body: unknown;
  try {
    body = JSON.parse(raw.toString('utf8')) as unknown;
  } catch {
    return NOT_JSON;
  }
  if (nestedDeeperThan(body)) return TOO_DEEP;
  const illFormed = illFormedStringPath(body);
  return illFormed === undefined ? body : new IllFormed(illFormed);
}

class IllFormed {
  constructor(readonly path: string) {}
}

function unparsed(body: unknown): Parsed | undefined {
  if (body === NOT_JSON) return { ok: false, json: false };
  if (body === TOO_DEEP) return { ok: false, deep: true };
  if (body instanceof IllFormed) return { ok: false, illFormed: body.path };
  return undefined;
}

function bodyDigest(raw: Buffer): string {
  return createHash('sha256').update(raw).digest('hex');
}

/** How long an event id is remembered: a day, and never less than the window in which its signature is fresh. */
export function eventTtlMs(toleranceS: number): number {
  return Math.max(EVENT_TTL_MS, 2 * toleranceS * 1000);
}

function parseTicketEvent(raw: Buffer): Parsed {
  const body = parseJson(raw);
  const refused = unparsed(body);
  if (refused) return refused;
  const p = ticketEventSchema.safeParse(body);
  return p.success ? { ok: true, eventId: p.data.eventId, ticket: p.data.ticket } : { ok: false, error: p.error };
}

function parseZendeskEvent(raw: Buffer): Parsed {
  const body = parseJson(raw);
  const refused = unparsed(body);
  if (refused) return refused;
  const p = zendeskEventSchema.safeParse(body);
  if (!p.success) return { ok: false, error: p.error };
  const t = p.data.ticket;
  const comment = p.data.comment;
  // The event, from signed parts only: the template's event id; else the comment's id (a new comment is a new
  // event, a redelivered one the same); else the body's digest. Not the signed timestamp: a sender's redelivery
  // signs the same body again with a fresh one, and it is still the same event.
  const eventId = p.data.eventId ?? (comment ? `zendesk-comment-${comment.id}` : undefined) ?? bodyDigest(raw);
  // A comment's body is the customer's new message; the ticket's description was the first one.
  const message = comment ? comment.body : t.description;
  return {
    ok: true,
    eventId,
    ticket: { id: `zendesk-${t.id}`, subject: t.subject, body: message, customer: t.requester },
  };
}

export function webhooksRouter(ctx: EngineContext, now: () => number = Date.now): Router {
  const r = Router();
  const raw = express.raw({ type: () => true, limit: BODY_LIMIT });

  const handle = (parse: (raw: Buffer) => Parsed) => async (req: express.Request, res: Response) => {
    const tenant = param(req.params.tenant) || (typeof req.query.tenant === 'string' ? req.query.tenant : '');
    // Own keys only: `constructor` or `toString` must not find Object.prototype's (a function is no secret).
    const secret =
      TENANT.test(tenant) && Object.hasOwn(ctx.cfg.WEBHOOK_SECRETS, tenant)
        ? ctx.cfg.WEBHOOK_SECRETS[tenant]
        : undefined;
    const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    const check =
      secret === undefined
        ? 'unknown_tenant'
        : checkSignature(
            secret,
            req.header(SIGNATURE_HEADER),
            req.header(TIMESTAMP_HEADER),
            body,
            now(),
            ctx.cfg.WEBHOOK_TOLERANCE_S,
          );
    if (check !== 'ok') {
      ctx.log.warn({ code: `webhook_${check}`, tenant }, 'webhook refused');
      return void res.status(401).json({ error: 'invalid_signature', reason: check });
    }
    const parsed = parse(body);
    if (!parsed.ok) {
      if ('json' in parsed)
        return void res
          .status(400)
          .json({ error: 'invalid_json', fields: [{ path: '(body)', message: 'body is not valid JSON' }] });
      if ('deep' in parsed) return bodyTooDeep(res);
      if ('illFormed' in parsed) return bodyIllFormed(res, parsed.illFormed);
      return void invalid(res, parsed.error);
    }
    let runId: string;
    try {
      runId = runIdOf(ctx, { tenant, ticket: parsed.ticket }, parsed.eventId);
    } catch (err) {
      if (err instanceof InvalidRunRequest)
        return void res.status(400).json({ error: 'invalid_request', fields: err.fields });
      throw err;
    }
    const key = ctx.keys.webhookEvent(tenant, parsed.eventId);
    const first = await ctx.redis.set(key, runId, 'PX', eventTtlMs(ctx.cfg.WEBHOOK_TOLERANCE_S), 'NX');
    if (first === null) {
      const previous = (await ctx.redis.get(key)) ?? runId;
      return void res.status(200).json({ runId: previous, created: false, duplicate: true });
    }
    try {
      const started = await startRun(ctx, { tenant, ticket: parsed.ticket }, undefined, now(), parsed.eventId);
      res.status(started.created ? 201 : 200).json({ ...started, duplicate: false });
    } catch (err) {
      await ctx.redis.del(key);
      if (err instanceof InvalidRunRequest)
        return void res.status(400).json({ error: 'invalid_request', fields: err.fields });
      throw err;
    }
  };

  for (const [path, parse] of [
    ['/webhooks/tickets', parseTicketEvent],
    ['/webhooks/zendesk', parseZendeskEvent],
  ] as const) {
    r.post(path, raw, handle(parse));
    r.post(`${path}/:tenant`, raw, handle(parse));
  }
  return r;
}
