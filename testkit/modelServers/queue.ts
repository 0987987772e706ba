/**
 * What a local model server answers, scriptable per test: a queue of replies
 * (one per request, in order), then `fallback` for every request after it.
 * Shared by the OpenAI and Anthropic servers; each renders a reply in its own
 * vendor's wire format.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface TurnReply {
  kind: 'turn';
  text?: string;
  /** `id`: the id the server gives the call (default: one of its own per call; a lax server may repeat one). */
  toolCalls?: { name: string; args: Record<string, unknown>; id?: string }[];
  /** null: the response carries no usage at all (the provider must call it an error). */
  usage?: {
    /** Every input token, cached reads and cache writes included (each vendor's wire splits it its own way). */
    input: number;
    output: number;
    /** Of `input`, read from the prompt cache. */
    cached?: number;
    /** Of `input`, written to the prompt cache (Anthropic bills it). */
    cacheWrite?: number;
  } | null;
  /** Streaming only: the connection is cut after this many events (no final usage, no end marker). */
  truncateAfterEvents?: number;
  /** Streaming only: a pause before each event after the first (a model dribbling tokens; crash tests kill the worker meanwhile). */
  eventDelayMs?: number;
}

export interface ErrorReply {
  kind: 'error';
  status: number;
  /** Sent verbatim: '30' or an HTTP-date. */
  retryAfter?: string;
}

/** Anything else: a status and a body sent as they are. */
export interface RawReply {
  kind: 'raw';
  status: number;
  body: unknown;
}

/** No answer at all: the request stays open until the client goes away (a model call a worker dies inside). */
export interface HoldReply {
  kind: 'hold';
}

export type Reply = TurnReply | ErrorReply | RawReply | HoldReply;
/** What a vendor's renderer draws (a hold is answered by never answering, before any renderer). */
export type RenderedReply = Exclude<Reply, HoldReply>;

export interface RecordedRequest {
  /** Epoch ms at which the request's body was read. */
  at: number;
  path: string;
  headers: IncomingMessage['headers'];
  body: Record<string, unknown>;
}

export interface ModelServer {
  url: string;
  /** Every request received, in order. */
  requests: RecordedRequest[];
  enqueue(...replies: Reply[]): void;
  /** Answer used once the queue is empty (default: a final text with usage). */
  fallback: Reply;
  /** Asked once the queue is empty, before `fallback` (undefined: the fallback answers): a reply chosen from the request. */
  respond?: ((req: RecordedRequest) => Reply | undefined) | undefined;
  close(): Promise<void>;
}

export type Render = (reply: RenderedReply, req: RecordedRequest, res: ServerResponse) => void;

/** Asked before the reply is rendered: true when it answered the request itself (the reply stays queued). */
export type Gate = (reply: RenderedReply, req: RecordedRequest, res: ServerResponse) => boolean;

export async function startModelServer(path: string, render: Render, gate?: Gate): Promise<ModelServer> {
  const queue: Reply[] = [];
  const requests: RecordedRequest[] = [];
  const handle: ModelServer = {
    url: '',
    requests,
    fallback: { kind: 'turn', text: 'done', usage: { input: 10, output: 2 } },
    enqueue: (...r) => void queue.push(...r),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== path) {
        res
          .writeHead(404, { 'content-type': 'application/json' })
          .end(JSON.stringify({ error: { message: `no route ${req.method} ${req.url}` } }));
        return;
      }
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
      } catch {
        res
          .writeHead(400, { 'content-type': 'application/json' })
          .end(JSON.stringify({ error: { message: 'body is not JSON' } }));
        return;
      }
      const recorded = { at: Date.now(), path: req.url, headers: req.headers, body };
      requests.push(recorded);
      const reply = queue[0] ?? handle.respond?.(recorded) ?? handle.fallback;
      if (reply.kind === 'hold') {
        if (queue[0] === reply) queue.shift();
        return;
      }
      if (gate?.(reply, recorded, res)) return;
      if (queue[0] === reply) queue.shift();
      render(reply, recorded, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  handle.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return handle;
}

/**
 * Writes SSE events; with `limit`, only the first `limit` of them, then cuts the
 * connection once they are flushed (the client has read part of an answer, as
 * when a server or a proxy dies mid-stream). With `delayMs`, one event at a time
 * with that pause between them (stops quietly when the client goes away).
 */
export function sse(res: ServerResponse, events: string[], limit = Infinity, delayMs = 0): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  res.flushHeaders();
  const cut = () => setTimeout(() => res.socket?.destroy(), 20);
  if (delayMs > 0) {
    const sent = events.slice(0, limit);
    let i = 0;
    const next = () => {
      if (res.destroyed) return;
      if (i >= sent.length) {
        if (limit < events.length) cut();
        else res.end();
        return;
      }
      res.write(sent[i++]!);
      setTimeout(next, delayMs);
    };
    return next();
  }
  if (limit >= events.length) {
    res.end(events.join(''));
    return;
  }
  res.write(events.slice(0, limit).join(''), cut);
}
