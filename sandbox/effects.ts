/**
 * The one create pipeline every vendor's effect endpoint runs, with the
 * vendor's own wire given by a Dialect (sandbox/vendors/*): its body format,
 * auth, key limits, success and error shapes and replay marker.
 *
 * In order: read body (413) -> auth (401/403) -> gate faults (429/503/drop,
 * nothing kept) -> parse and validate (vendor 400/422) -> Idempotency-Key
 * length (vendor 400) -> conflict_in_progress fault (vendor 409) -> atomic
 * admit (replay: the stored answer with the vendor's replay marker; same key,
 * other body: the vendor's mismatch error; in progress: the vendor's 409) ->
 * optional slow_commit (the commit happens even if the client gave up) ->
 * commit -> after-commit faults (dropped socket, 500, malformed body) or the
 * vendor's success answer.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { SandboxContext } from './context.js';
import { applyGate } from './gate.js';
import { BodyTooLarge, header, readBody, sendJson, sendRaw } from './http.js';
import type { StoredAnswer } from './store.js';
import type { EffectResource, FaultKind, SandboxRecord } from './types.js';

const AFTER_COMMIT: readonly FaultKind[] = ['lost_response_after_commit', 'error_after_commit', 'malformed_response'];
const DEFAULT_SLOW_COMMIT_MS = 1000;

/** An answer in a vendor's shape. */
export interface Answer {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

/** What a vendor's create endpoint looks like on the wire. */
export interface Dialect<I> {
  resource: EffectResource;
  /** Longest Idempotency-Key the vendor accepts. */
  maxKeyLength: number;
  /** undefined when the credentials are acceptable, else the vendor's 401/403. */
  authorize(req: IncomingMessage): Answer | undefined;
  /** The request's input and its canonical form (what "the same request" means for the key), or the vendor's 4xx. */
  parse(raw: Buffer, req: IncomingMessage): { input: I; canon: string } | Answer;
  /** Builds the committed resource and the success answer (seq: the resource's next sequence number). */
  create(input: I, seq: number, nowMs: number): { id: string; resource: Record<string, unknown>; answer: StoredAnswer };
  /** The stored answer as a replay (with the vendor's replay marker, when it has one). */
  replay(answer: StoredAnswer): Answer;
  /** Headers on a first (non-replayed) success. */
  firstHeaders?: Record<string, string>;
  errors: {
    keyTooLong(max: number): Answer;
    keyReused(key: string): Answer;
    inProgress(key: string): Answer;
    internal(): Answer;
    rateLimited(): Answer;
    unavailable(): Answer;
    tooLarge(): Answer;
  };
}

export function send(res: ServerResponse, a: Answer): void {
  sendJson(res, a.status, a.body, a.headers);
}

export async function createEffect<I>(
  ctx: SandboxContext,
  req: IncomingMessage,
  res: ServerResponse,
  d: Dialect<I>,
): Promise<void> {
  const store = ctx.store;
  const { faults } = ctx;
  let raw: Buffer;
  try {
    raw = await readBody(req);
  } catch (err) {
    if (err instanceof BodyTooLarge) send(res, { ...d.errors.tooLarge(), headers: { connection: 'close' } });
    return; // otherwise the client went away: nobody to answer
  }
  const denied = d.authorize(req);
  if (denied) return void send(res, denied);
  if (applyGate(faults, d.resource, res, { rateLimited: d.errors.rateLimited(), unavailable: d.errors.unavailable() }))
    return;
  const parsed = d.parse(raw, req);
  if ('status' in parsed) return void send(res, parsed);
  const key = header(req, 'idempotency-key');
  if (key !== null && key.length > d.maxKeyLength) return void send(res, d.errors.keyTooLong(d.maxKeyLength));
  if (key !== null && faults.fire(d.resource, ['conflict_in_progress']) !== undefined)
    return void send(res, d.errors.inProgress(key));
  if (key !== null && store.knows(d.resource, key) && faults.fire(d.resource, ['no_lookup']) !== undefined)
    return void send(res, d.errors.internal());

  const admission = key === null ? ({ kind: 'new' } as const) : store.admit(d.resource, key, parsed.canon);
  // ignore_keys is only drawn for a key the service already knows: that is where it changes the outcome.
  const ignoreKeys = admission.kind !== 'new' && faults.fire(d.resource, ['ignore_keys']) !== undefined;
  if (!ignoreKeys) {
    if (admission.kind === 'replay') return void send(res, d.replay(admission.answer));
    if (admission.kind === 'key_reused') return void send(res, d.errors.keyReused(key!));
    if (admission.kind === 'in_progress') return void send(res, d.errors.inProgress(key!));
  }

  let committed = false;
  try {
    const slow = faults.fire(d.resource, ['slow_commit']);
    if (slow !== undefined) await ctx.delays.sleep(slow.ms ?? DEFAULT_SLOW_COMMIT_MS);
    const now = store.now();
    const made = d.create(parsed.input, store.nextSeq(d.resource), now);
    const record: SandboxRecord = {
      id: made.id,
      kind: d.resource,
      idempotencyKey: key,
      createdAtMs: now,
      resource: made.resource,
    };
    store.commit(record, made.answer, admission.kind === 'new');
    committed = true;

    const after = faults.fire(d.resource, AFTER_COMMIT);
    if (res.destroyed) return; // the client timed out during a slow commit; the effect stands
    if (after?.kind === 'lost_response_after_commit') return void res.destroy();
    if (after?.kind === 'error_after_commit') return void send(res, d.errors.internal());
    if (after?.kind === 'malformed_response')
      return void sendRaw(res, made.answer.status, truncated(JSON.stringify(made.answer.body)));
    send(res, { ...made.answer, ...(d.firstHeaders ? { headers: d.firstHeaders } : {}) });
  } finally {
    // A request that ends before its commit saves nothing for its key (the vendors do the same).
    if (!committed && key !== null && admission.kind === 'new') store.release(d.resource, key);
  }
}

/** A deterministic not-JSON payload: the first half of the real one. */
function truncated(json: string): string {
  return json.slice(0, Math.max(1, Math.floor(json.length / 2)));
}
