/** The support agent's run input: a ticket. The engine hands it over as `unknown`; the support tools and prompts narrow it here. */
import { z } from 'zod';
import { TerminalError } from '../../core/errors.js';

/** Strict at every level: an unknown field is a 400 naming it, never silently dropped. */
export const ticketSchema = z.object({
  id: z.string().min(1).max(200),
  subject: z.string().min(1).max(1000),
  body: z.string().max(200_000),
  customer: z.object({
    email: z.string().email(),
    name: z.string().min(1).max(200),
  }).strict(),
}).strict();
export type Ticket = z.infer<typeof ticketSchema>;

/** Inputs already parsed: a run's input object is the same at every step (the engine caches the run spec). */
const parsedInputs = new WeakMap<object, Ticket>();

/** The run input as a ticket; an input that is not one is a TerminalError (`invalid_input`): no retry makes it one. */
export function ticketOf(input: unknown): Ticket {
  const known = typeof input === 'object' && input !== null ? parsedInputs.get(input) : undefined;
  if (known) return known;
  const parsed = ticketSchema.safeParse(input);
  if (!parsed.success) throw new TerminalError('invalid_input', 'the run input is not a support ticket', { issues: parsed.error.issues.map((i) => i.path.join('.')) });
  if (typeof input === 'object' && input !== null) parsedInputs.set(input, parsed.data);
  return parsed.data;
}
