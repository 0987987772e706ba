import { z } from 'zod';
import { ticketOf } from '../ticket.js';
import { defineReadTool } from '../../../core/agent.js';
import type { ReadTool } from '../../../core/tool.js';

/** Reads the ticket the run was started for (the run's input: no service call). */
export const readTicket: ReadTool<Record<string, never>> = defineReadTool({
  name: 'read_ticket',
  description: 'Read the support ticket this run is working on.',
  args: z.object({}).strict(),
  timeoutMs: 1000,
  async execute(_args, ctx) {
    const ticket = ticketOf(ctx.input);
    return { id: ticket.id, subject: ticket.subject, body: ticket.body, customer: ticket.customer };
  },
});
