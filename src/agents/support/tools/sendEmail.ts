import { z } from 'zod';
import { defineWriteTool } from '../../../core/agent.js';
import type { WriteTool } from '../../../core/tool.js';
import { RESEND_KEY_WINDOW_MS, type ResendClient } from '../vendors/resend.js';

const args = z
  .object({
    to: z.email(),
    template: z.string().min(1).max(100),
    subject: z.string().min(1).max(500),
    body: z.string().min(1).max(50_000),
  })
  .strict();

export type SendEmailArgs = z.infer<typeof args>;

/** Resend tag values allow ASCII letters, digits, underscores and dashes only. */
const tagValue = (s: string) => s.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 256);

/**
 * Sends an email through Resend with the action's Idempotency-Key. A doubt is settled by
 * re-sending the identical request with the same key inside Resend's 24 hours (Resend answers
 * the original and sends nothing); past them, a person decides.
 */
export const sendEmailTool = (resend: ResendClient): WriteTool<SendEmailArgs> =>
  defineWriteTool<SendEmailArgs>({
    name: 'send_email',
    description: 'Send an email to the customer.',
    args,
    timeoutMs: 5000,
    service: { enforcesKey: true, reconcile: [{ kind: 'replay_same_key', windowMs: RESEND_KEY_WINDOW_MS }] },
    // The business action is "this template to this recipient", whatever the wording. The recipient
    // is normalised (trimmed, lowercased as a whole: domains are case-insensitive and so is every
    // mailbox provider's local part in practice), so `Carol@Example.com` and `carol@example.com` are
    // one action; the address sent is the one given.
    identity: (a) => ({ to: a.to.trim().toLowerCase(), template: a.template }),
    async dispatch(a, _ctx, req) {
      const { id } = await resend.send(
        { to: [a.to], subject: a.subject, text: a.body, tags: [{ name: 'template', value: tagValue(a.template) }] },
        { idempotencyKey: req.idempotencyKey, timeoutMs: req.timeoutMs, signal: req.signal },
      );
      // Resend documents no replay marker: a replayed answer looks like a first one.
      return { receipt: id, output: { id, status: 'sent' }, replayed: false };
    },
  });
