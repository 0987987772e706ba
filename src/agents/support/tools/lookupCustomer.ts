import { z } from 'zod';
import { httpJson, type ServiceOptions } from '../../../core/http.js';
import type { ReadTool } from '../../../core/tool.js';

export const lookupCustomerTool = (service: ServiceOptions): ReadTool<{ email: string }> => ({
  name: 'lookup_customer',
  description: 'Look a customer profile up by email in the support system.',
  effect: 'read',
  args: z.object({ email: z.string().email() }).strict(),
  timeoutMs: 3000,
  async execute(args, ctx) {
    const res = await httpJson(`${service.baseUrl}/v1/customers/${encodeURIComponent(args.email)}`, { method: 'GET', timeoutMs: this.timeoutMs, signal: ctx.signal });
    return res.body;
  },
});
