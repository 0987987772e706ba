/**
 * The effect endpoints of tickets, emails and refunds: idempotent create and
 * the reconciliation lookup.
 *
 * Create, in order: read body -> gate faults (429/503/drop, nothing kept) ->
 * Idempotency-Key and body checks (400) -> atomic admit (replay 200, reused
 * key 422, in progress 409) -> optional slow_commit delay (lookups say
 * processing; the commit happens even if the client gave up) -> commit ->
 * after-commit faults (dropped socket, 500, malformed 201) or 201.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { canonicalJson } from './canonical.js';
import type { SandboxContext } from './context.js';
import { applyGate } from './gate.js';
import { BodyTooLarge, header, readBody, sendJson, sendRaw } from './http.js';
import type { EffectResource, FaultKind } from './types.js';

const AFTER_COMMIT: readonly FaultKind[] = ['lost_response_after_commit', 'error_after_commit', 'malformed_response'];
const DEFAULT_SLOW_COMMIT_MS = 1000;

export async function createEffect(
  ctx: SandboxContext,
  req: IncomingMessage,
  res: ServerResponse,
  resource: EffectResource,
): Promise<void> {
  const store = ctx.store;
  const { faults } = ctx;
  const key = header(req, 'idempotency-key');
  const requestId = header(req, 'x-request-id');
  // In flight from the headers on, so a lookup never says "stopped" while this request can still commit.
  const release = key === null ? undefined : store.track(resource, key, requestId);
  try {
    let raw: Buffer;
    try {
      raw = await readBody(req);
    } catch (err) {
      if (err instanceof BodyTooLarge) sendJson(res, 413, { error: 'body_too_large' }, { connection: 'close' });
      return; // otherwise the client went away: nobody to answer
    }
    if (applyGate(faults, resource, res)) return;
    if (key === null) return sendJson(res, 400, { error: 'idempotency_key_required' });
    const body = parseObject(raw);
    if (typeof body === 'string') return sendJson(res, 400, { error: body });

    const canon = canonicalJson(body);
    const admission = store.admit(resource, key, canon);
    // ignore_keys is only drawn for a key the service already knows: that is where it changes the outcome.
    const ignoreKeys = admission.kind !== 'new' && faults.fire(resource, ['ignore_keys']) !== undefined;
    if (!ignoreKeys) {
      if (admission.kind === 'replay')
        return sendJson(res, 200, admission.record, { 'idempotent-replayed': 'true' });
      if (admission.kind === 'key_reused') return sendJson(res, 422, { error: 'idempotency_key_reused' });
      if (admission.kind === 'in_progress') return sendJson(res, 409, { error: 'request_in_progress' });
    }

    const slow = faults.fire(resource, ['slow_commit']);
    if (slow !== undefined) await ctx.delays.sleep(slow.ms ?? DEFAULT_SLOW_COMMIT_MS);
    const record = store.commit(resource, { key, canon, requestId, body, registered: admission.kind === 'new' });

    const after = faults.fire(resource, AFTER_COMMIT);
    if (res.destroyed) return; // the client timed out during a slow commit; the effect stands
    if (after?.kind === 'lost_response_after_commit') return void res.destroy();
    if (after?.kind === 'error_after_commit') return sendJson(res, 500, { error: 'internal_error' });
    if (after?.kind === 'malformed_response') return sendRaw(res, 201, truncated(JSON.stringify(record)));
    sendJson(res, 201, record);
  } finally {
    release?.();
  }
}

/** GET /v1/:resource?idempotency_key=K | ?request_id=R */
export function lookupEffect(
  ctx: SandboxContext,
  res: ServerResponse,
  resource: EffectResource,
  query: URLSearchParams,
): void {
  if (ctx.faults.fire(resource, ['no_lookup']) !== undefined)
    return sendJson(res, 501, { error: 'lookup_unsupported' });
  const key = query.get('idempotency_key');
  const requestId = query.get('request_id');
  if (key) return sendJson(res, 200, ctx.store.lookupByKey(resource, key));
  if (requestId) return sendJson(res, 200, ctx.store.lookupByRequestId(resource, requestId));
  sendJson(res, 400, { error: 'idempotency_key_or_request_id_required' });
}

export function getEffect(ctx: SandboxContext, res: ServerResponse, resource: EffectResource, id: string): void {
  const record = ctx.store.get(resource, id);
  if (record === undefined) return sendJson(res, 404, { error: 'not_found' });
  sendJson(res, 200, record);
}

/** The parsed JSON object, or the error code to answer with. */
function parseObject(raw: Buffer): Record<string, unknown> | string {
  if (raw.length === 0) return 'body_required';
  let value: unknown;
  try {
    value = JSON.parse(raw.toString('utf8'));
  } catch {
    return 'invalid_json';
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return 'body_must_be_json_object';
  return value as Record<string, unknown>;
}

/** A deterministic not-JSON payload: the first half of the real one. */
function truncated(json: string): string {
  return json.slice(0, Math.max(1, Math.floor(json.length / 2)));
}
