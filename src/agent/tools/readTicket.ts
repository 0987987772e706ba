import { z } from 'zod';
import type { ReadTool } from './tool.js';

/** Reads the ticket the run was started for (from the run's spec: no service call). */
export const readTicket: ReadTool<Record<string, never>> = {
  name: 'read_ticket',
  description: 'Read the support ticket this run is working on.',
  effect: 'read',
  args: z.object({}).strict(),
  timeoutMs: 1000,
  async execute(_args, ctx) {
    return { id: ctx.ticket.id, subject: ctx.ticket.subject, body: ctx.ticket.body, customer: ctx.ticket.customer };
  },
};
