import { z } from 'zod';
import { dispatchCreate, lookupByKey } from './sandboxResource.js';
import type { ServiceOptions } from '../../../core/http.js';
import type { WriteTool } from '../../../core/tool.js';

const args = z
  .object({
    subject: z.string().min(1).max(500),
    body: z.string().min(1).max(20_000),
    priority: z.enum(['low', 'normal', 'high', 'urgent']).default('normal'),
    sourceTicketId: z.string().min(1),
  })
  .strict();

export type CreateTicketArgs = z.infer<typeof args>;

/** Opens a ticket in the support system (Zendesk-style Idempotency-Key on create). */
export const createTicketTool = (service: ServiceOptions): WriteTool<CreateTicketArgs> => ({
  name: 'create_ticket',
  description: 'Open a follow-up ticket in the support system.',
  effect: 'write',
  args,
  timeoutMs: 5000,
  service: { enforcesKey: true, lookup: 'key' },
  // One follow-up ticket per source ticket and subject, whatever the wording of the body; a subject
  // that differs only in case or spacing is the same ticket.
  identity: (a) => ({ sourceTicketId: a.sourceTicketId.trim(), subject: a.subject.trim().replace(/\s+/g, ' ').toLowerCase() }),
  dispatch: (a, _ctx, req) => dispatchCreate(service, 'tickets', a, req),
  lookup: (_ctx, req) => lookupByKey(service, 'tickets', req),
});
