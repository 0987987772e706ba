/** The tool registry and its schema hash (pinned by every run at creation). */
import { fingerprint } from '../../../core/canonical.js';
import { z } from 'zod';
import type { ToolSpec } from '../../../core/model.js';
import { createTicketTool } from './createTicket.js';
import type { ServiceOptions } from '../../../core/http.js';
import { lookupCustomerTool } from './lookupCustomer.js';
import { readTicket } from './readTicket.js';
import { refundTool } from './refund.js';
import { searchKbTool } from './searchKb.js';
import { sendEmailTool } from './sendEmail.js';
import type { Tool } from '../../../core/tool.js';
import { sandboxServices, type SupportServices } from '../vendors/index.js';
import { ResendClient } from '../vendors/resend.js';
import { StripeClient } from '../vendors/stripe.js';
import { ZendeskClient } from '../vendors/zendesk.js';

export const AGENT_VERSION = 'support-agent@1';

export class ToolRegistry {
  private readonly byName: Map<string, Tool>;
  readonly specs: ToolSpec[];
  readonly schemaHash: string;

  constructor(readonly tools: Tool[]) {
    this.byName = new Map(tools.map((t) => [t.name, t]));
    this.specs = tools.map((t) => ({
      name: t.name,
      description: t.description,
      parameters: z.toJSONSchema(t.args, { io: 'input' }) as Record<string, unknown>,
    }));
    const shape = this.specs.map((s, i) => ({ ...s, effect: tools[i]!.effect }));
    this.schemaHash = fingerprint(shape).slice(0, 16);
  }

  get(name: string): Tool | undefined {
    return this.byName.get(name);
  }
}

/**
 * The support agent's tools, each built with the service it calls (src/agents/support/vendors:
 * Zendesk, Resend, Stripe, and the support system's reads). A plain `{ baseUrl }` is every
 * vendor at that URL with the sandbox's credentials (development and tests).
 * The order feeds the schema hash: keep it.
 */
export function createSupportTools(services: SupportServices | ServiceOptions): Tool[] {
  const s = 'zendesk' in services ? services : sandboxServices(services.baseUrl);
  return [
    readTicket, lookupCustomerTool(s.reads), searchKbTool(s.reads),
    createTicketTool(new ZendeskClient(s.zendesk)), sendEmailTool(new ResendClient(s.resend)), refundTool(new StripeClient(s.stripe)),
  ];
}

export function defaultRegistry(services: SupportServices | ServiceOptions): ToolRegistry {
  return new ToolRegistry(createSupportTools(services));
}
