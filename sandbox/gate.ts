/**
 * Faults that strike before any processing: 429, 503, or a dropped socket.
 * Nothing is registered or committed when one fires. The 429 and 503 bodies
 * are the vendor's own when the caller gives them (sandbox/vendors/*).
 */
import type { ServerResponse } from 'node:http';
import type { FaultPlan } from './faults.js';
import { sendJson } from './http.js';
import type { FaultKind } from './types.js';

const GATE_KINDS: readonly FaultKind[] = ['rate_limit', 'unavailable', 'refuse_before_commit'];

interface Shaped {
  status: number;
  body: unknown;
}

/** true when a gate fault fired and the request has been answered (or its socket destroyed). */
export function applyGate(
  faults: FaultPlan,
  resource: string,
  res: ServerResponse,
  shapes?: { rateLimited: Shaped; unavailable: Shaped },
): boolean {
  const rule = faults.fire(resource, GATE_KINDS);
  if (rule === undefined) return false;
  switch (rule.kind) {
    case 'rate_limit':
      sendJson(res, 429, shapes?.rateLimited.body ?? { error: 'rate_limited' }, {
        'retry-after': String(Math.ceil(rule.retryAfterS ?? 0)),
      });
      break;
    case 'unavailable':
      sendJson(
        res,
        503,
        shapes?.unavailable.body ?? { error: 'unavailable' },
        rule.retryAfterS === undefined ? undefined : { 'retry-after': String(Math.ceil(rule.retryAfterS)) },
      );
      break;
    default:
      res.destroy();
  }
  return true;
}
