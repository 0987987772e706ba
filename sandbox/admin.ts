/**
 * Admin endpoints under /_sandbox: counts, fault rules, reset. Never faulted
 * and never counted as requests.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { SandboxContext } from './context.js';
import { readBody, sendJson } from './http.js';
import { faultsBodySchema } from './types.js';

export async function handleAdmin(
  ctx: SandboxContext,
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  reset: () => void,
): Promise<void> {
  const route = `${req.method ?? ''} ${path}`;
  switch (route) {
    case 'GET /_sandbox/counts':
      return sendJson(res, 200, ctx.store.counts());
    case 'POST /_sandbox/faults':
    case 'POST /_sandbox/faults/add': {
      const parsed = faultsBodySchema.safeParse(await readJson(req));
      if (!parsed.success) return sendJson(res, 400, { error: 'invalid_fault_rules', issues: parsed.error.issues });
      if (path.endsWith('/add')) ctx.faults.add(parsed.data.rules);
      else ctx.faults.set(parsed.data.rules);
      return sendJson(res, 200, { ok: true, rules: ctx.faults.size });
    }
    case 'DELETE /_sandbox/faults':
      ctx.faults.clear();
      return sendJson(res, 200, { ok: true, rules: 0 });
    case 'POST /_sandbox/reset':
      reset();
      return sendJson(res, 200, { ok: true });
    default:
      return sendJson(res, 404, { error: 'not_found' });
  }
}

/** The parsed body, or undefined when it is not JSON (the schema then names the problem). */
async function readJson(req: IncomingMessage): Promise<unknown> {
  try {
    return JSON.parse((await readBody(req)).toString('utf8'));
  } catch {
    return undefined;
  }
}
