/**
 * The scenario timeline: entries from every source (the scenario's own
 * actions, the run's event stream read over SSE, the ledger history from the
 * run view, the wire tap, notable worker log lines), printed in time order as
 * offsets from the scenario's start.
 */
import type { TapRecord } from './tap.js';
import { parseSseBlock } from '../../../testkit/sse.js';

export interface TimelineEntry {
  at: number;
  seq: number;
  who: string;
  text: string;
}

export class Timeline {
  private readonly entries: TimelineEntry[] = [];
  private seq = 0;

  constructor(readonly t0: number = Date.now()) {}

  add(at: number, who: string, text: string): void {
    this.entries.push({ at, seq: this.seq++, who, text });
  }

  render(): string[] {
    const sorted = [...this.entries].sort((a, b) => a.at - b.at || a.seq - b.seq);
    const width = Math.max(8, ...sorted.map((e) => e.who.length));
    return sorted.map((e) => `${offset(e.at - this.t0)}  ${e.who.padEnd(width)}  ${e.text}`);
  }
}

function offset(ms: number): string {
  const s = (ms / 1000).toFixed(3);
  return `+${s.padStart(7)}s`;
}

/** A run event as read from GET /v1/runs/:id/events (the Redis stream entry id gives its time). */
export interface RunEvent {
  id: string;
  at: number;
  type: string;
  data: Record<string, unknown>;
}

export interface EventFollower {
  events: RunEvent[];
  /** Resolves with the first event (already seen or coming) that matches; rejects after timeoutMs. */
  waitFor(pred: (e: RunEvent) => boolean, timeoutMs: number, what: string): Promise<RunEvent>;
  close(): void;
}

/** Follows a run's Server-Sent Events over HTTP from its first event. */
/** The producer token of the scenario stack's API (run routes are closed without one). */
export const SCENARIO_TOKEN = 'scenario-producer-token';

export function followEvents(apiUrl: string, runId: string): EventFollower {
  const events: RunEvent[] = [];
  const waiters = new Set<{ pred: (e: RunEvent) => boolean; resolve: (e: RunEvent) => void }>();
  const ac = new AbortController();
  const push = (e: RunEvent) => {
    events.push(e);
    for (const w of [...waiters]) {
      if (w.pred(e)) {
        waiters.delete(w);
        w.resolve(e);
      }
    }
  };
  void (async () => {
    try {
      const res = await fetch(`${apiUrl}/v1/runs/${encodeURIComponent(runId)}/events`, {
        signal: ac.signal,
        headers: { accept: 'text/event-stream', authorization: `Bearer ${SCENARIO_TOKEN}` },
      });
      if (!res.ok || !res.body) return;
      const decoder = new TextDecoder();
      let buf = '';
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buf += decoder.decode(chunk, { stream: true });
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const e = parseSse(block);
          if (e) push(e);
        }
      }
    } catch {
      // aborted by close(), or the API went away at the end of the scenario
    }
  })();
  return {
    events,
    waitFor(pred, timeoutMs, what) {
      const seen = events.find(pred);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const w = {
          pred,
          resolve: (e: RunEvent) => {
            clearTimeout(t);
            resolve(e);
          },
        };
        const t = setTimeout(() => {
          waiters.delete(w);
          const last = events
            .slice(-3)
            .map((e) => `${e.type} ${JSON.stringify(e.data)}`)
            .join('; ');
          reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last events: ${last || 'none'})`));
        }, timeoutMs);
        waiters.add(w);
      });
    },
    close: () => ac.abort(),
  };
}

function parseSse(block: string): RunEvent | undefined {
  const ev = parseSseBlock(block);
  if (!ev?.id) return undefined;
  let parsed: Record<string, unknown> = {};
  try {
    const v = JSON.parse(ev.data) as unknown;
    if (v && typeof v === 'object' && !Array.isArray(v)) parsed = v as Record<string, unknown>;
  } catch {
    parsed = { raw: ev.data };
  }
  return { id: ev.id, at: Number(ev.id.split('-')[0]), type: ev.event || 'message', data: parsed };
}

/** "GET /api/v2/tickets.json?external_id=a_0123456789ab…" with long query values shortened. */
export function shortUrl(url: string): string {
  return url.replace(/=([^&]{12})[^&]{4,}/g, '=$1…').replace(/%40/g, '@');
}

/** One line for a tap record: what the service did with the request. */
export function describeTap(r: TapRecord): string {
  const ms = r.end - r.start;
  const head = `${r.method} ${shortUrl(r.url)}`;
  if (r.outcome === 'client_gone') return `${head}: the client went away after ${ms} ms, no answer sent`;
  if (r.outcome === 'dropped') return `${head}: connection dropped by the service after ${ms} ms, no answer`;
  const b = (r.body ?? {}) as Record<string, unknown>;
  const rec = (b.record ?? {}) as Record<string, unknown>;
  const bits: string[] = [];
  if (typeof b.id === 'string') bits.push(b.id);
  if (typeof b.status === 'string') bits.push(b.status);
  if (typeof rec.id === 'string') bits.push(rec.id);
  if (typeof b.records === 'number') bits.push(`records=${b.records}`);
  if (typeof b.error === 'string') bits.push(b.error);
  return `${head} -> ${r.status}${bits.length ? ` ${bits.join(' ')}` : ''} (${ms} ms)`;
}

/** Compact JSON of a value for a timeline line, cut at `max` characters. */
export function brief(v: unknown, max = 140): string {
  if (v === undefined) return '';
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}
