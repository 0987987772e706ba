/**
 * The support agent's run input: a ticket. The engine hands it over as `unknown`; the support tools and prompts narrow
 * it here.
 */
import { z } from 'zod';
import { parseOnce } from '../../core/parseOnce.js';

/** Strict at every level: an unknown field is a 400 naming it, never silently dropped. */
export const ticketSchema = z
  .object({
    id: z.string().min(1).max(200),
    subject: z.string().min(1).max(1000),
    body: z.string().max(200_000),
    customer: z
      .object({
        email: z.email(),
        name: z.string().min(1).max(200),
      })
      .strict(),
  })
  .strict();
export type Ticket = z.infer<typeof ticketSchema>;

/**
 * The run input as a ticket (parsed once per input object); an input that is not one is a TerminalError
 * (`invalid_input`): no retry makes it one.
 */
export const ticketOf: (input: unknown) => Ticket = parseOnce(ticketSchema, 'the run input is not a support ticket');
