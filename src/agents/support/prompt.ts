/** The support agent's prompt: its instructions and the opening user message, from the run input (a ticket). */
import { ticketOf } from './ticket.js';

export const SUPPORT_INSTRUCTIONS = 'You are a support agent. Use the tools to resolve the ticket, then answer with a short final summary.';

export function supportPrompt(input: unknown): { system: string; user: string } {
  const ticket = ticketOf(input);
  return {
    system: SUPPORT_INSTRUCTIONS,
    user: `Ticket ${ticket.id}: ${ticket.subject}\n\n${ticket.body}\n\nCustomer: ${ticket.customer.name} <${ticket.customer.email}>`,
  };
}
