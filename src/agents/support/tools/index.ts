/**
 * The support agent's tools (the order feeds the tools' schema hash every run pins: keep it; new tools go last and
 * the agent's version moves with them).
 */
import type { ServiceOptions } from '../../../core/httpJson.js';
import type { Tool } from '../../../core/tool.js';
import { sandboxServices, type SupportServices } from '../vendors/index.js';
import { ResendClient } from '../vendors/resend.js';
import { StripeClient } from '../vendors/stripe.js';
import { ZendeskClient } from '../vendors/zendesk.js';
import { createTicketTool } from './createTicket.js';
import { lookupCustomerTool } from './lookupCustomer.js';
import { readTicket } from './readTicket.js';
import { refundTool } from './refund.js';
import { searchKbTool } from './searchKb.js';
import { sendEmailTool } from './sendEmail.js';
import { checkBackLaterTool } from './checkBackLater.js';
import { waitForReplyTool } from './waitForReply.js';

/**
 * Each tool built with the service it calls (src/agents/support/vendors: Zendesk, Resend,
 * Stripe, and the support system's reads, from src/config/config.ts). A plain `{ baseUrl }` is
 * every vendor at that URL with the sandbox's credentials (development and tests).
 */
export function createSupportTools(services: SupportServices | ServiceOptions): Tool[] {
  const s = 'zendesk' in services ? services : sandboxServices(services.baseUrl);
  return [
    readTicket,
    lookupCustomerTool(s.reads),
    searchKbTool(s.reads),
    createTicketTool(new ZendeskClient(s.zendesk)),
    sendEmailTool(new ResendClient(s.resend)),
    refundTool(new StripeClient(s.stripe)),
    waitForReplyTool,
    checkBackLaterTool,
  ];
}
