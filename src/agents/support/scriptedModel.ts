/**
 * The built-in support agent for the scripted provider: read the ticket, look
 * the customer and the knowledge base up, open a follow-up ticket, email the
 * customer, finish. Deterministic from the ticket, so a replay is identical.
 */
import type { Ticket } from './ticket.js';
import type { Script } from '../../models/scriptedTurns.js';

export function supportScript(ticket: Ticket): Script {
  const usage = (p: number, c: number) => ({ promptTokens: p, completionTokens: c });
  const base = { transientFailures: 0 };
  return [
    { ...base, toolCalls: [{ name: 'read_ticket', args: {} }], usage: usage(400, 40) },
    {
      ...base,
      toolCalls: [{ name: 'lookup_customer', args: { email: ticket.customer.email } }],
      usage: usage(520, 40),
    },
    { ...base, toolCalls: [{ name: 'search_kb', args: { query: ticket.subject } }], usage: usage(640, 60) },
    {
      ...base,
      toolCalls: [
        {
          name: 'create_ticket',
          args: {
            subject: `Follow-up: ${ticket.subject}`,
            body: `Customer ${ticket.customer.name} reported: ${ticket.subject}`,
            priority: 'normal',
            sourceTicketId: ticket.id,
          },
        },
      ],
      usage: usage(800, 90),
    },
    {
      ...base,
      toolCalls: [
        {
          name: 'send_email',
          args: {
            to: ticket.customer.email,
            template: 'ticket_acknowledged',
            subject: `Re: ${ticket.subject}`,
            body: `Hello ${ticket.customer.name}, we have opened a follow-up for your request and will get back to you shortly.`,
          },
        },
      ],
      usage: usage(950, 120),
    },
    { ...base, toolCalls: [], final: 'Ticket triaged, follow-up opened, customer notified.', usage: usage(1100, 50) },
  ];
}
