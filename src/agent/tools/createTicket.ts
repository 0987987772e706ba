import { z } from 'zod';
import { dispatchCreate, lookupByKey } from './sandboxResource.js';
import type { WriteTool } from './tool.js';

const args = z
  .object({
    subject: z.string().min(1).max(500),
    body: z.string().min(1).max(20_000),
    priority: z.enum(['low', 'normal', 'high', 'urgent']).default('normal'),
    sourceTicketId: z.string().min(1),
  })
  .strict();

/** Opens a ticket in the support system (Zendesk-style Idempotency-Key on create). */
export const createTicket: WriteTool<z.infer<typeof args>> = {
  name: 'create_ticket',
  description: 'Open a follow-up ticket in the support system.',
  effect: 'write',
  args,
  timeoutMs: 5000,
  service: { enforcesKey: true, lookup: 'key' },
  // One follow-up ticket per source ticket and subject, whatever the wording of the body; a subject
  // that differs only in case or spacing is the same ticket.
  identity: (a) => ({ sourceTicketId: a.sourceTicketId.trim(), subject: a.subject.trim().replace(/\s+/g, ' ').toLowerCase() }),
  dispatch: (a, ctx, req) => dispatchCreate('tickets', a, ctx, req),
  lookup: (ctx, req) => lookupByKey('tickets', ctx, req),
};
