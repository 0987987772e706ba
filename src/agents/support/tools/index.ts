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
 * The support agent's tools, each built with the service it calls (`SANDBOX_URL`
 * in src/config/config.ts). The order feeds the schema hash: keep it.
 */
export function createSupportTools(service: ServiceOptions): Tool[] {
  return [readTicket, lookupCustomerTool(service), searchKbTool(service), createTicketTool(service), sendEmailTool(service), refundTool(service)];
}

export function defaultRegistry(service: ServiceOptions): ToolRegistry {
  return new ToolRegistry(createSupportTools(service));
}
