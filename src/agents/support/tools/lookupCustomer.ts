import { z } from 'zod';
import { httpJson, type ServiceOptions } from '../../../core/httpJson.js';
import { defineReadTool } from '../../../core/agent.js';
import type { ReadTool } from '../../../core/tool.js';

/** The service read's own timeout (the engine's deadline still bounds it). */
const TIMEOUT_MS = 3000;

export const lookupCustomerTool = (service: ServiceOptions): ReadTool<{ email: string }> =>
  defineReadTool({
    name: 'lookup_customer',
    description: 'Look a customer profile up by email in the support system.',
    args: z.object({ email: z.email() }).strict(),
    timeoutMs: TIMEOUT_MS,
    async execute(args, ctx) {
      const res = await httpJson(`${service.baseUrl}/v1/customers/${encodeURIComponent(args.email)}`, {
        method: 'GET',
        timeoutMs: TIMEOUT_MS,
        signal: ctx.signal,
      });
      return res.body;
    },
  });
