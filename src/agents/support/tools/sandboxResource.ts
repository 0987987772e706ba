/**
 * Dispatch and lookup for a resource of a service that speaks the sandbox's
 * idempotency contract (Zendesk tickets and Resend emails speak the same
 * shape: Idempotency-Key on create, query by key for reconciliation).
 */
import { AgentError } from '../../../core/errors.js';
import { httpJson, OutcomeUnknownError, type ServiceOptions } from '../../../core/http.js';
import type { DispatchReceipt, DispatchRequest, LookupResult } from '../../../core/tool.js';

interface ServiceRecord {
  id: string;
  [k: string]: unknown;
}

function isRecord(x: unknown): x is ServiceRecord {
  return typeof x === 'object' && x !== null && typeof (x as { id?: unknown }).id === 'string';
}

export async function dispatchCreate(service: ServiceOptions, resource: string, body: unknown, req: DispatchRequest): Promise<DispatchReceipt> {
  const res = await httpJson(`${service.baseUrl}/v1/${resource}`, {
    method: 'POST',
    headers: { 'idempotency-key': req.idempotencyKey, 'x-request-id': req.requestId },
    body,
    timeoutMs: req.timeoutMs,
    signal: req.signal,
  });
  if (res.status === 200 || res.status === 201) {
    // A 2xx without a record is not a success: we cannot tell what happened.
    if (!isRecord(res.body)) throw new OutcomeUnknownError(`malformed ${resource} response`, { status: res.status, reason: 'malformed' });
    return { receipt: res.body.id, output: { id: res.body.id, status: 'created' }, replayed: res.headers.get('idempotent-replayed') === 'true' };
  }
  if (res.status === 409) throw new OutcomeUnknownError(`${resource} request with this key is still in progress`, { status: 409, reason: 'in_progress' });
  throw new AgentError('invalid_input', `${resource} rejected the request (${res.status})`, { status: res.status, body: res.body });
}

export async function lookupByKey(
  service: ServiceOptions,
  resource: string,
  req: { idempotencyKey: string; requestId: string; signal: AbortSignal },
): Promise<LookupResult> {
  let res;
  try {
    res = await httpJson(`${service.baseUrl}/v1/${resource}?idempotency_key=${encodeURIComponent(req.idempotencyKey)}`, {
      method: 'GET',
      timeoutMs: 5000,
      signal: req.signal,
    });
  } catch (err) {
    return { status: 'undecidable', evidence: { error: (err as Error).message } };
  }
  const body = res.body as { status?: string; record?: unknown; stopped?: boolean; records?: number } | undefined;
  if (res.status === 200 && body?.status === 'committed' && isRecord(body.record)) {
    const effects = typeof body.records === 'number' ? body.records : undefined;
    return {
      status: 'committed', receipt: body.record.id, output: { id: body.record.id, status: 'created' },
      evidence: { query: 'idempotency_key', record: body.record.id, ...(effects !== undefined ? { records: effects } : {}) },
      ...(effects !== undefined ? { effects } : {}),
    };
  }
  if (res.status === 200 && body?.status === 'processing') return { status: 'processing', evidence: { query: 'idempotency_key', status: 'processing' } };
  // "Not found" alone is not "not sent": only absent AND stopped allows a retry.
  if (res.status === 200 && body?.status === 'absent' && body.stopped === true) {
    return { status: 'absent_stopped', evidence: { query: 'idempotency_key', status: 'absent', stopped: true } };
  }
  return { status: 'undecidable', evidence: { query: 'idempotency_key', httpStatus: res.status, body } };
}
