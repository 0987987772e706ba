import { z } from 'zod';
import { defineWriteTool } from '../../../core/agent.js';
import type { WriteTool } from '../../../core/tool.js';
import { ZENDESK_KEY_WINDOW_MS, type ZendeskClient, type ZendeskTicket } from '../vendors/zendesk.js';

const args = z
  .object({
    subject: z.string().min(1).max(500),
    body: z.string().min(1).max(20_000),
    priority: z.enum(['low', 'normal', 'high', 'urgent']).default('normal'),
    sourceTicketId: z.string().min(1),
  })
  .strict();

export type CreateTicketArgs = z.infer<typeof args>;

const created = (t: ZendeskTicket) => ({ id: String(t.id), status: 'created' });

/**
 * Opens a follow-up ticket in Zendesk: `external_id` is the ledger's action id and the
 * Idempotency-Key the action's key. A doubt is settled by the ticket's external_id, then,
 * inside Zendesk's 2-hour key window, by re-sending the identical create (answered `hit`).
 */
export const createTicketTool = (zendesk: ZendeskClient): WriteTool<CreateTicketArgs> =>
  defineWriteTool<CreateTicketArgs>({
    name: 'create_ticket',
    description: 'Open a follow-up ticket in the support system.',
    args,
    timeoutMs: 5000,
    service: {
      enforcesKey: true,
      reconcile: [{ kind: 'lookup' }, { kind: 'replay_same_key', windowMs: ZENDESK_KEY_WINDOW_MS }],
    },
    // One follow-up ticket per source ticket and subject, whatever the wording of the body; a subject
    // that differs only in case or spacing is the same ticket.
    identity: (a) => ({
      sourceTicketId: a.sourceTicketId.trim(),
      subject: a.subject.trim().replace(/\s+/g, ' ').toLowerCase(),
    }),
    async dispatch(a, _ctx, req) {
      const { ticket, replayed } = await zendesk.createTicket(
        // An internal note: the follow-up is for the team, not a message to the customer.
        {
          subject: a.subject,
          comment: { body: a.body, public: false },
          priority: a.priority,
          external_id: req.actionId,
          tags: ['agent_followup'],
        },
        { idempotencyKey: req.idempotencyKey, timeoutMs: req.timeoutMs, signal: req.signal },
      );
      return { receipt: String(ticket.id), output: created(ticket), replayed };
    },
    async lookup(_ctx, req) {
      const found = await zendesk.ticketsByExternalId(req.actionId, { timeoutMs: req.timeoutMs, signal: req.signal });
      if (found.length === 0) return { status: 'absent', evidence: { query: 'external_id', found: 0 } };
      const first = found.reduce((a, b) => (b.id < a.id ? b : a));
      return {
        status: 'committed',
        receipt: String(first.id),
        output: created(first),
        evidence: { query: 'external_id', ticket: first.id, found: found.length },
        effects: found.length,
      };
    },
  });
