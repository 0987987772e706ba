/**
 * A wire tap between the workers and the sandbox: a plain HTTP proxy that
 * forwards every request unchanged and records what the service answered
 * (status, record id, lookup status) or that no answer came back (the service
 * dropped the connection, or the client gave up and went away). The scenarios
 * print these records in their timelines, so the service's side of a 429, a
 * timeout or a lookup is visible next to the ledger's.
 *
 * Failure behaviour is passed through as it happened: a socket the sandbox
 * destroys is destroyed towards the worker too, and a worker that gives up
 * (timeout, death) makes the tap abandon the upstream request, so the sandbox
 * sees the client leave exactly as it would without the tap.
 */
import { createServer, request as httpRequest, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface TapRecord {
  start: number;
  end: number;
  method: string;
  /** Path and query as sent. */
  url: string;
  /** The request's Idempotency-Key, if it carried one (a same-key replay shows as a second POST with the same key). */
  idempotencyKey?: string;
  /** answered: a full response; dropped: the service closed the connection without one; client_gone: the worker left first. */
  outcome: 'answered' | 'dropped' | 'client_gone';
  status?: number;
  /** The JSON answer, when it was small and parsable. */
  body?: unknown;
}

export interface Tap {
  url: string;
  records: TapRecord[];
  /** Requests forwarded and not finished yet. */
  inflight(): { method: string; url: string; start: number }[];
  close(): Promise<void>;
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'proxy-connection', 'upgrade']);

function forwardable(h: IncomingHttpHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(h)) if (v !== undefined && !HOP_BY_HOP.has(k)) out[k] = v;
  return out;
}

function parseBody(chunks: Buffer[]): unknown {
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.length === 0 || text.length > 4096) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return { unparsable: text.slice(0, 40) };
  }
}

export async function startTap(targetUrl: string, onRecord: (r: TapRecord) => void = () => {}): Promise<Tap> {
  const target = new URL(targetUrl);
  const records: TapRecord[] = [];
  const open = new Map<number, { method: string; url: string; start: number }>();
  let seq = 0;

  const server = createServer((req, res) => {
    const id = seq++;
    const start = Date.now();
    const method = req.method ?? 'GET';
    const url = req.url ?? '/';
    const key = req.headers['idempotency-key'];
    const idempotencyKey = typeof key === 'string' ? key : undefined;
    open.set(id, { method, url, start });
    let done = false;
    const finish = (r: Omit<TapRecord, 'start' | 'end' | 'method' | 'url'>) => {
      if (done) return;
      done = true;
      open.delete(id);
      const rec: TapRecord = {
        start,
        end: Date.now(),
        method,
        url,
        ...(idempotencyKey !== undefined ? { idempotencyKey } : {}),
        ...r,
      };
      records.push(rec);
      onRecord(rec);
    };

    const up = httpRequest({
      host: target.hostname,
      port: target.port,
      method,
      path: url,
      headers: forwardable(req.headers),
      agent: false,
    });
    up.on('response', (ur) => {
      const chunks: Buffer[] = [];
      let size = 0;
      ur.on('data', (c: Buffer) => {
        size += c.length;
        if (size <= 4096) chunks.push(c);
      });
      ur.on('end', () => finish({ outcome: 'answered', status: ur.statusCode ?? 0, body: parseBody(chunks) }));
      ur.on('error', () => {
        finish({ outcome: 'dropped', status: ur.statusCode ?? 0 });
        res.destroy();
      });
      res.writeHead(ur.statusCode ?? 502, forwardable(ur.headers));
      ur.pipe(res);
    });
    // The service destroyed the socket (e.g. lost_response_after_commit): the worker gets no answer either.
    up.on('error', () => {
      finish({ outcome: 'dropped' });
      res.destroy();
    });
    // The worker went away (its own timeout, or it died): abandon the upstream request like it did.
    res.on('close', () => {
      if (res.writableFinished) return;
      finish({ outcome: 'client_gone' });
      up.destroy();
    });
    req.pipe(up);
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    records,
    inflight: () => [...open.values()],
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
