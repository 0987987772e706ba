/**
 * One request as generated, byte for byte: node:http sends the path, the headers and the body as given (fetch
 * would normalise the path and refuse some headers). An event stream is closed once its head arrives.
 */
import { request } from 'node:http';

export interface RawRequest {
  method: string;
  /** Path and query exactly as sent, %-escapes (well-formed or not) included. */
  target: string;
  headers: Record<string, string>;
  body?: Buffer;
}

export type Answer = { status: number; type: string; ms: number } | { hung: true; ms: number } | { error: string };

export function send(base: URL, req: RawRequest, timeoutMs: number): Promise<Answer> {
  const started = Date.now();
  return new Promise((resolve) => {
    let done = false;
    const finish = (a: Answer) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(a);
    };
    const r = request(
      { host: base.hostname, port: base.port, method: req.method, path: req.target, headers: req.headers },
      (res) => {
        const type = (res.headers['content-type'] ?? '').split(';')[0]!;
        const answer = { status: res.statusCode ?? 0, type, ms: Date.now() - started };
        if (type === 'text/event-stream') {
          res.destroy();
          return finish(answer);
        }
        res.resume();
        res.on('end', () => finish({ ...answer, ms: Date.now() - started }));
        res.on('error', () => finish(answer));
      },
    );
    const timer = setTimeout(() => {
      r.destroy();
      finish({ hung: true, ms: Date.now() - started });
    }, timeoutMs);
    r.on('error', (err) => finish({ error: String(err) }));
    r.end(req.body);
  });
}
