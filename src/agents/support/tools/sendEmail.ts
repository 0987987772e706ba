import { z } from 'zod';
import { dispatchCreate, lookupByKey } from './sandboxResource.js';
import type { ServiceOptions } from '../../../core/http.js';
import type { WriteTool } from '../../../core/tool.js';

const args = z
  .object({
    to: z.string().email(),
    template: z.string().min(1).max(100),
    subject: z.string().min(1).max(500),
    body: z.string().min(1).max(50_000),
  })
  .strict();

export type SendEmailArgs = z.infer<typeof args>;

/** Sends an email (Resend-style Idempotency-Key on POST /emails). */
export const sendEmailTool = (service: ServiceOptions): WriteTool<SendEmailArgs> => ({
  name: 'send_email',
  description: 'Send an email to the customer.',
  effect: 'write',
  args,
  timeoutMs: 5000,
  service: { enforcesKey: true, lookup: 'key' },
  // The business action is "this template to this recipient", whatever the wording. The recipient
  // is normalised (trimmed, lowercased as a whole: domains are case-insensitive and so is every
  // mailbox provider's local part in practice), so `Carol@Example.com` and `carol@example.com` are
  // one action; the address sent is the one given.
  identity: (a) => ({ to: a.to.trim().toLowerCase(), template: a.template }),
  dispatch: (a, _ctx, req) => dispatchCreate(service, 'emails', a, req),
  lookup: (_ctx, req) => lookupByKey(service, 'emails', req),
});
