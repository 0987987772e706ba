/** The support agent's run input: a ticket. The engine hands it over as `unknown`; the support tools and prompts narrow it here. */
import { TerminalError } from '../../core/errors.js';
import { ticketSchema, type Ticket } from '../../producer/schemas.js';

/** The run input as a ticket; an input that is not one is a TerminalError (`invalid_input`): no retry makes it one. */
export function ticketOf(input: unknown): Ticket {
  const parsed = ticketSchema.safeParse(input);
  if (!parsed.success) throw new TerminalError('invalid_input', 'the run input is not a support ticket', { issues: parsed.error.issues.map((i) => i.path.join('.')) });
  return parsed.data;
}
