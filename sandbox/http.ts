/** Small node:http helpers: read a bounded body, answer JSON, read one header. */
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';

export const MAX_BODY_BYTES = 1024 * 1024;

export class BodyTooLarge extends Error {
  readonly code = 'body_too_large';
}

/**
 * Resolve with the raw body; reject with BodyTooLarge past `limit`, or with
 * the stream error if the client goes away before the end (nothing to answer then).
 */
export function readBody(req: IncomingMessage, limit = MAX_BODY_BYTES): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const fail = (err: Error) => {
      if (done) return;
      done = true;
      reject(err);
    };
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) fail(new BodyTooLarge(`body over ${limit} bytes`));
      else if (!done) chunks.push(chunk);
    });
    req.on('end', () => {
      if (done) return;
      done = true;
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
    });
    req.on('error', fail);
    req.on('close', () => fail(new Error('client closed before the body ended')));
  });
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers?: OutgoingHttpHeaders): void {
  sendRaw(res, status, JSON.stringify(body), headers);
}

/** Answer a JSON content type with an arbitrary payload (malformed_response uses it directly). */
export function sendRaw(res: ServerResponse, status: number, payload: string, headers?: OutgoingHttpHeaders): void {
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(payload),
    ...headers,
  });
  res.end(payload);
}

/** One header as a non-empty string, or null (repeated headers are joined by node with ", "). */
export function header(req: IncomingMessage, name: string): string | null {
  const v = req.headers[name];
  const s = Array.isArray(v) ? v.join(', ') : v;
  return s === undefined || s === '' ? null : s;
}
