/**
 * Admin endpoints under /_sandbox: counts, fault rules, reset, the sandbox
 * clock and the vendors' key windows. Never faulted and never counted as requests.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { SandboxContext } from './context.js';
import { readBody, sendJson } from './http.js';
import { z } from 'zod';
import { EFFECT_RESOURCES, faultsBodySchema } from './types.js';

const clockBodySchema = z.object({ advanceMs: z.number().int().min(0) }).strict();
const windowBodySchema = z.object({ resource: z.enum(EFFECT_RESOURCES), ms: z.number().int().min(0) }).strict();

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
      return void sendJson(res, 200, ctx.store.counts());
    case 'POST /_sandbox/faults':
    case 'POST /_sandbox/faults/add': {
      const parsed = faultsBodySchema.safeParse(await readJson(req));
      if (!parsed.success)
        return void sendJson(res, 400, { error: 'invalid_fault_rules', issues: parsed.error.issues });
      if (path.endsWith('/add')) ctx.faults.add(parsed.data.rules);
      else ctx.faults.set(parsed.data.rules);
      return void sendJson(res, 200, { ok: true, rules: ctx.faults.size });
    }
    case 'DELETE /_sandbox/faults':
      ctx.faults.clear();
      return void sendJson(res, 200, { ok: true, rules: 0 });
    case 'POST /_sandbox/clock': {
      // A replay "after the window" without waiting a day: keys older than their window are forgotten.
      const parsed = clockBodySchema.safeParse(await readJson(req));
      if (!parsed.success) return void sendJson(res, 400, { error: 'invalid_clock', issues: parsed.error.issues });
      ctx.store.advance(parsed.data.advanceMs);
      return void sendJson(res, 200, { ok: true, now: ctx.store.now() });
    }
    case 'POST /_sandbox/key-window': {
      const parsed = windowBodySchema.safeParse(await readJson(req));
      if (!parsed.success) return void sendJson(res, 400, { error: 'invalid_key_window', issues: parsed.error.issues });
      ctx.store.windows[parsed.data.resource] = parsed.data.ms;
      return void sendJson(res, 200, { ok: true });
    }
    case 'POST /_sandbox/reset':
      reset();
      return void sendJson(res, 200, { ok: true });
    default:
      return void sendJson(res, 404, { error: 'not_found' });
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
