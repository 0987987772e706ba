/**
 * How the three vendor adapters turn a non-2xx answer into the error a
 * retry or a reconciliation acts on (src/core/tool.ts WriteTool.dispatch).
 * 429/503 (RetryableError) and other 5xx (OutcomeUnknownError) are already
 * classified by src/core/httpJson.ts. Error details carry the status and the
 * vendor's error code, never the body text (it can echo customer data).
 */
import { AgentError, KeyConflictError } from '../../../core/errors.js';
import { OutcomeUnknownError } from '../../../core/httpJson.js';

export type Verdict = 'conflict' | 'in_progress' | 'rejected';

/** The error for a vendor answer the adapter does not accept. */
export function vendorError(vendor: string, what: string, status: number, code: string, verdict: Verdict): AgentError {
  const details = { vendor, status, code };
  if (verdict === 'conflict')
    return new KeyConflictError(
      `${vendor} holds this Idempotency-Key for a different request (${what}: ${status} ${code})`,
      details,
    );
  if (verdict === 'in_progress')
    return new OutcomeUnknownError(
      `${vendor} is still processing a request with this key (${what}: ${status} ${code})`,
      { ...details, reason: 'in_progress' },
    );
  return new AgentError('invalid_input', `${vendor} refused the request (${what}: ${status} ${code})`, details);
}

/** A 2xx whose body is not the documented shape: the request may have been processed. */
export function malformed(vendor: string, what: string, status: number): OutcomeUnknownError {
  return new OutcomeUnknownError(`malformed ${vendor} response (${what}: ${status})`, {
    vendor,
    status,
    reason: 'malformed',
  });
}

/** Basic auth header value. */
export function basic(user: string, password: string): string {
  return `Basic ${Buffer.from(`${user}:${password}`, 'utf8').toString('base64')}`;
}
