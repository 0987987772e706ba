/** The tool registry and its schema hash (pinned by every run at creation). */
import { fingerprint } from '../../canonical.js';
import { z } from 'zod';
import type { ToolSpec } from '../models/provider.js';
import { createTicket } from './createTicket.js';
import { lookupCustomer } from './lookupCustomer.js';
import { readTicket } from './readTicket.js';
import { refund } from './refund.js';
import { searchKb } from './searchKb.js';
import { sendEmail } from './sendEmail.js';
import type { Tool } from './tool.js';

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

export function defaultRegistry(): ToolRegistry {
  return new ToolRegistry([readTicket, lookupCustomer, searchKb, createTicket, sendEmail, refund]);
}
