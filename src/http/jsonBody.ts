/**
 * The API's JSON body parser: express.json's reading of a body, and for the body nearly every producer sends
 * (`application/json`, UTF-8, its length given, not compressed, within the limit) the same reading without its
 * per-request machinery: a charset decoder object and a body stream helper per request, the content type parsed
 * twice. Anything else (another charset, a compressed or chunked body, a body over the limit, an empty one) goes
 * to express.json as it is, which answers it as it always has.
 *
 * The same outcome either way: the body in `req.body`, a body that is not JSON (or whose first value is neither an
 * object nor an array: express.json's strict mode) an error of type `entity.parse.failed` with status 400, a
 * request cut off before its body ended an error of type `request.aborted`; a leading byte order mark is dropped,
 * as express.json's decoder drops it.
 */
import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';

/** `application/json`, alone or with a UTF-8 charset: the only type the short path reads. */
const PLAIN_JSON = /^application\/json\s*(?:;\s*charset="?utf-8"?\s*)?$/i;
/** JSON's whitespace, then its first value's first character. */
const FIRST_VALUE = /^[ \t\n\r]*([^ \t\n\r])/;

type BodyError = Error & { status: number; type: string };

function bodyError(message: string, type: string): BodyError {
  return Object.assign(new Error(message), { status: 400, type, expose: true });
}

/** The body's JSON as express.json (strict) reads it; a `entity.parse.failed` error otherwise. */
export function parseJsonBody(text: string): unknown {
  const body = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  const first = FIRST_VALUE.exec(body)?.[1];
  if (first !== '{' && first !== '[') throw bodyError('the body is not a JSON object or array', 'entity.parse.failed');
  try {
    return JSON.parse(body) as unknown;
  } catch (err) {
    throw Object.assign(bodyError((err as Error).message, 'entity.parse.failed'), { cause: err });
  }
}

/** Whether the short path reads this request's body: see the module comment. */
function plain(req: Request, limitBytes: number): boolean {
  const h = req.headers;
  const type = h['content-type'];
  const length = Number(h['content-length']);
  return (
    type !== undefined &&
    PLAIN_JSON.test(type) &&
    length > 0 &&
    length <= limitBytes &&
    h['transfer-encoding'] === undefined &&
    (h['content-encoding'] === undefined || h['content-encoding'].toLowerCase() === 'identity')
  );
}

/** Reads the whole body of a request whose length is known and within the limit, then parses it. */
function readPlain(req: Request, next: NextFunction): void {
  const chunks: Buffer[] = [];
  const done = (err?: Error) => {
    req.off('data', onData);
    req.off('end', onEnd);
    req.off('aborted', onAborted);
    req.off('error', onError);
    if (err) return void next(err);
    try {
      const raw = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      req.body = parseJsonBody(raw.toString('utf8'));
    } catch (parseErr) {
      return void next(parseErr);
    }
    next();
  };
  const onData = (chunk: Buffer) => void chunks.push(chunk);
  const onEnd = () => done();
  const onAborted = () => done(bodyError('request aborted', 'request.aborted'));
  const onError = (err: Error) => done(Object.assign(err, { status: 400 }));
  req.on('data', onData);
  req.on('end', onEnd);
  req.on('aborted', onAborted);
  req.on('error', onError);
}

export function jsonBody(limit: string, limitBytes: number): RequestHandler {
  const general: RequestHandler = express.json({ limit });
  return (req: Request, res: Response, next: NextFunction) => {
    if (req.readableEnded || !plain(req, limitBytes)) return void general(req, res, next);
    readPlain(req, next);
  };
}
