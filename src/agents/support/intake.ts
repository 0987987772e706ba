/**
 * The ways a ticket reaches the support agent besides `POST /v1/runs {agent: 'support', input}`: the `ticket`
 * shorthand body, and two signed webhooks (the engine checks signature, tenant and body; src/producer/webhooks.ts):
 *
 *  - `POST /webhooks/tickets`: our own event format, `{ v: 1, eventId, ticket }`;
 *  - `POST /webhooks/zendesk`: the JSON a Zendesk trigger is configured to send (its placeholders fill it).
 *
 * The ticket is the subject. A later event on the same ticket (a customer's reply: a new event id, or a Zendesk
 * event with a new comment id) goes to the ticket's run if that run waits for a reply (wait_for_reply, on the
 * ticket's reply key): the run resumes with the message, once. Otherwise it starts a follow-up run, linked to the
 * ticket's run before it. The same event twice is one run (or one resume).
 */
import { hash } from 'node:crypto';
import { z } from 'zod';
import type { AgentIntake, WebhookEvent } from '../../core/agent.js';
import { eventKeySchema } from '../../runs/spec.js';
import { ticketSchema, type Ticket } from './ticket.js';
import { replyKey } from './tools/waitForReply.js';

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
        requester: z.object({ email: z.email(), name: z.string().min(1).max(200) }).strict(),
      })
      .strict(),
  })
  .strict();

type ZendeskEvent = z.infer<typeof zendeskEventSchema>;

function zendeskEvent(e: ZendeskEvent, raw: Buffer): WebhookEvent<Ticket> {
  const t = e.ticket;
  // The event, from signed parts only: the template's event id; else the comment's id (a new comment is a new
  // event, a redelivered one the same); else the body's digest. Not the signed timestamp: a sender's redelivery
  // signs the same body again with a fresh one, and it is still the same event.
  const id = e.eventId ?? (e.comment ? `zendesk-comment-${e.comment.id}` : undefined) ?? digest(raw);
  // A comment's body is the customer's new message; the ticket's description was the first one.
  const body = e.comment ? e.comment.body : t.description;
  const input = { id: `zendesk-${t.id}`, subject: t.subject, body, customer: t.requester };
  // A comment is a message on a ticket that exists: the answer a run of it may be waiting for.
  return { id, input, ...(e.comment ? { delivery: replyDelivery(input) } : {}) };
}

/** The customer's message for the ticket's run waiting on its reply key (the waiting call's `{ event }`). */
function replyDelivery(t: Ticket): { key: string; payload: { message: string } } {
  return { key: replyKey(t.id), payload: { message: t.body } };
}

function digest(raw: Buffer): string {
  return hash('sha256', raw, 'hex');
}

export const supportIntake: AgentIntake<Ticket> = {
  shorthand: 'ticket',
  webhooks: {
    tickets: {
      summary: 'A signed ticket event.',
      body: ticketEventSchema,
      event: (e: z.infer<typeof ticketEventSchema>) => ({
        id: e.eventId,
        input: e.ticket,
        delivery: replyDelivery(e.ticket),
      }),
    },
    zendesk: { summary: 'A signed Zendesk trigger.', body: zendeskEventSchema, event: zendeskEvent },
  },
};
