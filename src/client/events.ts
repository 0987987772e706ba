/**
 * A run's events (GET /v1/runs/:id/events, server-sent events) as an async iterator. Each event's id is its place in
 * the run's stream; after a cut connection (the API restarted, a proxy dropped it) the iterator asks again with
 * Last-Event-ID = the last id it yielded, and the API goes on after that event: none twice, none missed. The
 * iterator ends after the run's terminal status_changed event, once the API has nothing after it and the run still
 * stands ended (an operator's retry since: the iterator follows the run at work again).
 */
import { isTerminal } from '../core/status.js';
import { errorOf, FleetApiError, RunNotFound, StoreUnavailable, Unreachable } from './errors.js';
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
  /**
   * Reconnections in a row that bring no event before the iterator throws (default 20): Unreachable, with the last
   * connection error as its cause, when none of them got an HTTP answer (the API is down or hung); else an Error.
   */
  maxReconnects?: number;
  /**
   * A connection that brings no byte for this long (no event, no keep-alive: the API sends one every 10 s) is taken
   * for dropped and asked again (default STREAM_IDLE_TIMEOUT_MS).
   */
  idleTimeoutMs?: number;
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

/** The default of FollowOptions.idleTimeoutMs: three and a half of the API's keep-alive periods (10 s). */
export const STREAM_IDLE_TIMEOUT_MS = 35_000;

export async function* followRunEvents(
  transport: Transport,
  runId: string,
  opts: FollowOptions = {},
): AsyncGenerator<RunEventMessage, void, undefined> {
  let last = opts.after;
  const maxReconnects = opts.maxReconnects ?? 20;
  const idleMs = opts.idleTimeoutMs ?? STREAM_IDLE_TIMEOUT_MS;
  let barren = 0; // connections in a row that brought no event
  let answeredInRow = false; // whether any of those got an HTTP answer
  let lastError: unknown; // the last connection's error, when it got none
  let lastTimedOut = false; // and whether that was the idle timeout
  for (;;) {
    if (opts.signal?.aborted) return;
    let progressed = false;
    let waitMs: number | undefined;
    // Whether the API ended this response itself (after a terminal status, or with nothing to send).
    let closedByApi = false;
    // A connection that brings nothing (no event, no keep-alive) for idleMs was dropped without a close (a proxy, a
    // NAT): it is aborted, and asked again after the last event yielded.
    const idle = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => idle.abort(new Error(`no byte for ${idleMs} ms`)), idleMs);
    };
    let answered = false;
    try {
      arm();
      const res = await transport.send(
        {
          method: 'GET',
          path: `/v1/runs/${encodeURIComponent(runId)}/events`,
          headers: last ? { 'last-event-id': last } : {},
          signal: opts.signal ? AbortSignal.any([opts.signal, idle.signal]) : idle.signal,
        },
        false,
      );
      answered = true;
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
          arm();
          const parsed = parseSse(buf + decoder.decode(chunk, { stream: true }));
          buf = parsed.rest;
          for (const e of parsed.events) {
            last = e.id || last;
            progressed = true;
            clearTimeout(timer); // the caller's time with an event is not the stream's silence
            yield e;
            arm();
          }
        }
        closedByApi = true;
      }
    } catch (err) {
      if (err instanceof FleetApiError) throw err;
      if (opts.signal?.aborted) return;
      // Cut, refused or silent: asked again below, after the last event yielded.
      if (!answered) {
        lastError = err;
        lastTimedOut = idle.signal.aborted;
      }
    } finally {
      clearTimeout(timer);
    }
    // The API ends a run's stream at its terminal status; an operator may retry the run after it (its stream then
    // goes on: `run_retried`, `running`...). So the stream is asked again after the terminal status, at once: the
    // API sends what came after it, or, for a run still ended, closes with nothing. Then the run is asked where it
    // stands: ended (or gone), the iterator ends; at work (the API closed for another reason), it is asked again.
    if (closedByApi && !progressed) {
      const status = await runStatus(transport, runId, opts.signal);
      if (status === 'gone' || (status !== undefined && isTerminal(status))) return;
    }
    barren = progressed ? 0 : barren + 1;
    answeredInRow = !progressed && (answeredInRow || answered);
    if (barren > maxReconnects) {
      if (!answeredInRow)
        throw new Unreachable(transport.base, { cause: lastError, timeoutMs: lastTimedOut ? idleMs : undefined });
      throw new Error(`event stream of ${runId}: ${maxReconnects} reconnections in a row brought no event`);
    }
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

/** The run's status (GET /v1/runs/:id), `gone` when the API knows no such run, undefined when it could not say. */
async function runStatus(transport: Transport, runId: string, signal?: AbortSignal): Promise<string | undefined> {
  try {
    const { body } = await transport.json<{ status?: unknown }>({
      method: 'GET',
      path: `/v1/runs/${encodeURIComponent(runId)}`,
      onNoAnswer: 'repeat',
      signal,
    });
    return typeof body.status === 'string' ? body.status : undefined;
  } catch (err) {
    if (err instanceof RunNotFound) return 'gone';
    if (err instanceof FleetApiError && !(err instanceof StoreUnavailable)) throw err;
    return undefined;
  }
}
