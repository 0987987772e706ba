import { z } from 'zod';
import { httpJson, type ServiceOptions } from '../../../core/http.js';
import type { ReadTool } from '../../../core/tool.js';

export const searchKbTool = (service: ServiceOptions): ReadTool<{ query: string }> => ({
  name: 'search_kb',
  description: 'Search the knowledge base for articles relevant to a query.',
  effect: 'read',
  args: z.object({ query: z.string().min(1).max(500) }).strict(),
  timeoutMs: 3000,
  async execute(args, ctx) {
    const res = await httpJson(`${service.baseUrl}/v1/kb?q=${encodeURIComponent(args.query)}`, { method: 'GET', timeoutMs: this.timeoutMs, signal: ctx.signal });
    return res.body;
  },
});
