/**
 * The support agent's compensation rule: whatever the original tool was (an
 * email that may have gone out wrong, a follow-up ticket opened in error, a
 * refund whose outcome is unclear), the compensating action is a clarification
 * email to the customer. The services the agent writes to offer no cancel, and
 * what the customer is owed is a correct account of what happened. The engine
 * sends it through the effect ledger (src/ledger/compensation.ts).
 */
import type { CompensableAction, CompensationCall } from '../../core/agent.js';
import type { Ticket } from './ticket.js';

const clip = (s: string, n: number) => (s.length <= n ? s : `${s.slice(0, n - 1)}…`);

export function clarificationEmail(original: CompensableAction, ticket: Ticket): CompensationCall {
  const a = (original.args ?? {}) as { to?: unknown; orderId?: unknown };
  const to = original.tool === 'send_email' && typeof a.to === 'string' ? a.to : ticket.customer.email;
  const about = `your request "${clip(ticket.subject, 200)}"`;
  const what: Record<string, string> = {
    send_email: `An email we sent you about ${about} may have been incomplete or sent in error. Please disregard it.`,
    create_ticket: `A follow-up ticket about ${about} was opened in error and has been withdrawn.`,
    refund: `The refund${typeof a.orderId === 'string' ? ` for order ${clip(a.orderId, 100)}` : ''} discussed in ${about} is under review: please do not rely on an earlier confirmation until we write again.`,
  };
  const body = `Hello ${ticket.customer.name},\n\n${(Object.hasOwn(what, original.tool) ? what[original.tool] : undefined) ?? `An automated action about ${about} needs a correction.`}\nA member of our team is following up with you personally.\n`;
  return {
    tool: 'send_email',
    args: {
      to,
      template: `compensation:${original.actionId}`,
      subject: clip(`Correction: ${ticket.subject}`, 500),
      body,
    },
  };
}
