/**
 * The built-in support agent for the scripted provider: read the ticket, look the customer and the knowledge base
 * up (both in one turn: the step runs them at once), open a follow-up ticket, email the customer, finish. A ticket
 * that says nothing (an empty body) first asks the customer what happened and waits for the reply on the ticket
 * (the question email and the wait in one turn). Deterministic from the ticket, so a replay is identical.
 */
import type { Ticket } from './ticket.js';
import type { Script, ScriptTurn } from '../../models/scriptedTurns.js';

/** How long the scripted agent waits for a customer's answer. */
const REPLY_WAIT_HOURS = 48;

const usage = (p: number, c: number) => ({ promptTokens: p, completionTokens: c });
const base = { transientFailures: 0 };

export function supportScript(ticket: Ticket): Script {
  return [
    { ...base, toolCalls: [{ name: 'read_ticket', args: {} }], usage: usage(400, 40) },
    {
      ...base,
      toolCalls: [
        { name: 'lookup_customer', args: { email: ticket.customer.email } },
        { name: 'search_kb', args: { query: ticket.subject } },
      ],
      usage: usage(640, 100),
    },
    ...(ticket.body.trim() === '' ? [askCustomer(ticket)] : []),
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

/** The question and the wait for its answer, in one turn: the run parks once the email is sent. */
function askCustomer(ticket: Ticket): ScriptTurn {
  return {
    ...base,
    toolCalls: [
      {
        name: 'send_email',
        args: {
          to: ticket.customer.email,
          template: 'question',
          subject: `Re: ${ticket.subject}`,
          body: `Hello ${ticket.customer.name}, could you tell us what happened, and your order number?`,
        },
      },
      { name: 'wait_for_reply', args: { hours: REPLY_WAIT_HOURS } },
    ],
    usage: usage(700, 80),
  };
}
