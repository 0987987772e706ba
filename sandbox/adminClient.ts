/**
 * Typed client of the sandbox admin API for tests and the chaos campaign.
 * Every call throws SandboxAdminError when the sandbox answers non-2xx,
 * lets fetch's own error through when it cannot be reached, and a TimeoutError
 * when it does not answer.
 */
import { withTimeout } from '../src/core/timeout.js';
import { sandboxCountsSchema, type EffectResource, type FaultRule, type SandboxCounts } from './types.js';

export class SandboxAdminError extends Error {
  readonly code = 'sandbox_admin_failed';
  constructor(
    readonly status: number,
    readonly body: string,
    what: string,
  ) {
    super(`sandbox admin ${what} answered ${status}: ${body.slice(0, 200)}`);
  }
}

export async function getCounts(baseUrl: string): Promise<SandboxCounts> {
  return sandboxCountsSchema.parse(await call(baseUrl, 'GET', '/_sandbox/counts'));
}

/** Replace the fault rules. */
export async function setFaults(baseUrl: string, rules: FaultRule[]): Promise<void> {
  await call(baseUrl, 'POST', '/_sandbox/faults', { rules });
}

/** Append fault rules after the current ones. */
export async function addFaults(baseUrl: string, rules: FaultRule[]): Promise<void> {
  await call(baseUrl, 'POST', '/_sandbox/faults/add', { rules });
}

export async function clearFaults(baseUrl: string): Promise<void> {
  await call(baseUrl, 'DELETE', '/_sandbox/faults');
}

/** Clear records, counts and faults, and restart the fault PRNG from its seed. */
export async function reset(baseUrl: string): Promise<void> {
  await call(baseUrl, 'POST', '/_sandbox/reset');
}

/** Move the sandbox clock forward (keys older than their vendor's window are forgotten). */
export async function advanceClock(baseUrl: string, advanceMs: number): Promise<void> {
  await call(baseUrl, 'POST', '/_sandbox/clock', { advanceMs });
}

/** Set one vendor's Idempotency-Key window. */
export async function setKeyWindow(baseUrl: string, resource: EffectResource, ms: number): Promise<void> {
  await call(baseUrl, 'POST', '/_sandbox/key-window', { resource, ms });
}

/** An admin call that gets no answer fails (TimeoutError) instead of hanging its caller. */
const ADMIN_TIMEOUT_MS = 10_000;

async function call(baseUrl: string, method: string, path: string, body?: unknown): Promise<unknown> {
  const { res, text } = await withTimeout(ADMIN_TIMEOUT_MS, undefined, async (signal) => {
    const res = await fetch(new URL(path, baseUrl), {
      method,
      signal,
      headers: body === undefined ? undefined : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { res, text: await res.text() };
  });
  if (!res.ok) throw new SandboxAdminError(res.status, text, `${method} ${path}`);
  return text === '' ? undefined : (JSON.parse(text) as unknown);
}
