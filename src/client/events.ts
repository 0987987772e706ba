/**
 * A run's events (GET /v1/runs/:id/events, server-sent events) as an async iterator. Each event's id is its place in
 * the run's stream; after a cut connection (the API restarted, a proxy dropped it) the iterator asks again with
 * Last-Event-ID = the last id it yielded, and the API goes on after that event: none twice, none missed. The
 * iterator ends after the run's terminal status_changed event (the API ends the stream there).
 */
import { isTerminal } from '../core/status.js';
import { errorOf, FleetApiError, StoreUnavailable } from './errors.js';
import type { Transport } from './transport.js';

/** One event of a run: its id (pass it as `after` to go on from there), its type and its JSON data. */
export interface RunEventMessage {
  id: string;
  type: string;
  data: Record<string, unknown>;
}

export interface FollowOptions {
  /** Go on after this event id (one this iterator yielded earlier); default: from the run's first event. */
  after?: string;
  /** Stops the iterator (it then returns). */
  signal?: AbortSignal;
  /** Reconnections in a row that bring no event before the iterator throws (default 20). */
  maxReconnects?: number;
}

/** Whether `e` ends the run's stream: a status change to a terminal status. */
function ends(e: RunEventMessage): boolean {
  return e.type === 'status_changed' && isTerminal(e.data.status as string);
}

/** The complete events in `buf`, and what is left of it (an event not yet whole). */
export function parseSse(buf: string): { events: RunEventMessage[]; rest: string } {
  const events: RunEventMessage[] = [];
  let i: number;
  while ((i = buf.indexOf('\n\n')) >= 0) {
    const block = buf.slice(0, i);
    buf = buf.slice(i + 2);
    let id: string | undefined;
    let type = 'message';
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) continue; // a keep-alive
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'id') id = value;
      else if (field === 'event') type = value;
      else if (field === 'data') data.push(value);
    }
    if (id === undefined && data.length === 0) continue;
    events.push({ id: id ?? '', type, data: json(data.join('\n')) });
  }
  return { events, rest: buf };
}

function json(text: string): Record<string, unknown> {
  try {
    const v = JSON.parse(text || '{}') as unknown;
    return typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : { value: v };
  } catch {
    return { text };
  }
}

export async function* followRunEvents(
  transport: Transport,
  runId: string,
  opts: FollowOptions = {},
): AsyncGenerator<RunEventMessage, void, undefined> {
  let last = opts.after;
  const maxReconnects = opts.maxReconnects ?? 20;
  let barren = 0; // connections in a row that brought no event
  for (;;) {
    if (opts.signal?.aborted) return;
    let progressed = false;
    let waitMs: number | undefined;
    try {
      const res = await transport.send(
        {
          method: 'GET',
          path: `/v1/runs/${encodeURIComponent(runId)}/events`,
          headers: last ? { 'last-event-id': last } : {},
          signal: opts.signal,
        },
        false,
      );
      if (!res.ok) {
        // A refusal that says "come back" (the store away, too many viewers) is waited out; any other is thrown.
        const body = (await res.json().catch(() => ({}))) as Record<string, unknown>;
        const err = errorOf(res.status, body, transport.retryAfterMs(res), transport.tokenSent);
        if (!(err instanceof StoreUnavailable) && !(res.status === 503 && err.code === 'too_many_viewers')) throw err;
        waitMs = transport.retryAfterMs(res);
      } else {
        const decoder = new TextDecoder();
        let buf = '';
        for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
          const parsed = parseSse(buf + decoder.decode(chunk, { stream: true }));
          buf = parsed.rest;
          for (const e of parsed.events) {
            last = e.id || last;
            progressed = true;
            yield e;
            if (ends(e)) return;
          }
        }
      }
    } catch (err) {
      if (err instanceof FleetApiError) throw err;
      if (opts.signal?.aborted) return;
      // Cut or refused: asked again below, after the last event yielded.
    }
    barren = progressed ? 0 : barren + 1;
    if (barren > maxReconnects)
      throw new Error(`event stream of ${runId}: ${maxReconnects} reconnections in a row brought no event`);
    try {
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(resolve, waitMs ?? (progressed ? 0 : transport.backoffMs(barren)));
        opts.signal?.addEventListener(
          'abort',
          () => {
            clearTimeout(t);
            reject(new Error('aborted'));
          },
          {
            once: true,
          },
        );
      });
    } catch {
      return;
    }
  }
}
