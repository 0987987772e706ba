import { z } from 'zod';
import { httpJson, type ServiceOptions } from '../../../core/httpJson.js';
import { defineReadTool } from '../../../core/agent.js';
import type { ReadTool } from '../../../core/tool.js';

/** The service read's own timeout (the engine's deadline still bounds it). */
const TIMEOUT_MS = 3000;

export const searchKbTool = (service: ServiceOptions): ReadTool<{ query: string }> =>
  defineReadTool({
    name: 'search_kb',
    description: 'Search the knowledge base for articles relevant to a query.',
    args: z.object({ query: z.string().min(1).max(500) }).strict(),
    timeoutMs: TIMEOUT_MS,
    async execute(args, ctx) {
      const res = await httpJson(`${service.baseUrl}/v1/kb?q=${encodeURIComponent(args.query)}`, {
        method: 'GET',
        timeoutMs: TIMEOUT_MS,
        signal: ctx.signal,
      });
      return res.body;
    },
  });
