/**
 * Read-only endpoints for the read tools. Faults reach them only through
 * rules that name the resource ("kb", "customers"): gate faults, slow_commit
 * as a plain delay, and malformed_response.
 */
import type { ServerResponse } from 'node:http';
import type { SandboxContext } from './context.js';
import { applyGate } from './gate.js';
import { sendJson, sendRaw } from './http.js';
import { customerProfile, kbSearch } from './readData.js';
import type { ReadResource } from './types.js';

export async function kbRead(ctx: SandboxContext, res: ServerResponse, query: URLSearchParams): Promise<void> {
  const q = query.get('q');
  await answerRead(ctx, res, 'kb', () => (q ? [200, kbSearch(q)] : [400, { error: 'q_required' }]));
}

export async function customerRead(ctx: SandboxContext, res: ServerResponse, email: string): Promise<void> {
  await answerRead(ctx, res, 'customers', () => {
    if (!email.includes('@')) return [400, { error: 'invalid_email' }];
    const profile = customerProfile(email);
    return profile ? [200, profile] : [404, { error: 'customer_not_found' }];
  });
}

async function answerRead(
  ctx: SandboxContext,
  res: ServerResponse,
  resource: ReadResource,
  answer: () => [number, unknown],
): Promise<void> {
  if (applyGate(ctx.faults, resource, res)) return;
  const slow = ctx.faults.fire(resource, ['slow_commit']);
  if (slow !== undefined) await ctx.delays.sleep(slow.ms ?? 1000);
  if (res.destroyed) return;
  const [status, body] = answer();
  if (status === 200 && ctx.faults.fire(resource, ['malformed_response']) !== undefined)
    return void sendRaw(res, 200, JSON.stringify(body).slice(0, 8));
  sendJson(res, status, body);
}
