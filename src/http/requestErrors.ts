/**
 * Errors express raises for a client's mistake before a route runs: a body it
 * cannot parse, a path parameter with a malformed %-escape (`/v1/runs/%E0%A4%A`).
 * They answer a 4xx with a plain reason and leave at most a debug line: anyone
 * can send them, so they must not fill the error log.
 */
import type { Response } from 'express';
import type { Logger } from 'pino';
import { bodyParserError } from '../producer/bodyLimits.js';

type RequestError = Error & { status?: number; type?: string };

/** Whether `err` was a client's mistake, answered here; else the caller answers 500 and logs it. */
export function answerRequestError(err: RequestError, res: Response, log: Pick<Logger, 'debug'>): boolean {
  const status = err.status ?? 0;
  if (bodyParserError(err, res)) {
    log.debug({ code: 'request_refused', status: res.statusCode }, 'request refused');
    return true;
  }
  if (status < 400 || status >= 500) return false;
  log.debug({ code: 'request_refused', status }, 'request refused');
  const reason = err instanceof URIError ? 'a path parameter has a malformed %-escape' : 'the request is malformed';
  res.status(status).json({ error: 'bad_request', message: reason });
  return true;
}
