/**
 * HTTP to the services the tools call, with failures classified by what a
 * retry may do:
 *  - RetryableError: the request certainly had no effect (no connection made:
 *    refused, unresolved name, connect timeout; 429, 503 answered before processing) -> retried in code;
 *  - OutcomeUnknownError: the request may have left and been processed
 *    (timeout, reset, other 5xx, malformed body) -> reconcile, never resend blindly.
 * An error's details carry the status and a reason code, never the service's body.
 */
import { isAgentError, OutcomeUnknownError, RetryableError } from './errors.js';
import { connectFailed } from './neverSent.js';
import { TimeoutError, withTimeout } from './timeout.js';

export { OutcomeUnknownError };

/** A tool's service, given when the tool is built (never through the ToolContext). */
export interface ServiceOptions {
  /** Base URL of the service, without a trailing slash: `https://support.example.com`. */
  baseUrl: string;
}

export interface HttpResult {
  status: number;
  headers: Headers;
  body: unknown;
}

/**
 * One request, its body read included, bounded by init.timeoutMs (an explicit
 * timer, src/core/timeout.ts) and by init.signal.
 */
export interface HttpRequest {
  method: string;
  headers?: Record<string, string>;
  /** Sent as JSON. */
  body?: unknown;
  /** Sent as application/x-www-form-urlencoded instead (services that take forms). */
  form?: URLSearchParams;
  timeoutMs: number;
  signal: AbortSignal;
}

export async function httpJson(url: string, init: HttpRequest): Promise<HttpResult> {
  try {
    return await withTimeout(init.timeoutMs, init.signal, (signal) => request(url, init, signal));
  } catch (err) {
    if (init.signal.aborted)
      throw new OutcomeUnknownError(
        `request did not complete: ${(err as Error).message}`,
        { reason: 'aborted' },
        { cause: err },
      );
    if (err instanceof TimeoutError)
      throw new OutcomeUnknownError(
        `request did not complete: ${err.message}`,
        { reason: 'timeout_or_reset', timeoutMs: err.timeoutMs },
        { cause: err },
      );
    if (isAgentError(err)) throw err;
    if (connectFailed(err))
      throw new RetryableError(`connection not made: ${url}`, undefined, { reason: 'refused' }, { cause: err });
    throw new OutcomeUnknownError(
      `request did not complete: ${(err as Error).message}`,
      { reason: 'timeout_or_reset' },
      { cause: err },
    );
  }
}

async function request(url: string, init: HttpRequest, signal: AbortSignal): Promise<HttpResult> {
  const contentType =
    init.form !== undefined
      ? 'application/x-www-form-urlencoded'
      : init.body !== undefined
        ? 'application/json'
        : undefined;
  const payload =
    init.form !== undefined ? init.form.toString() : init.body !== undefined ? JSON.stringify(init.body) : undefined;
  const res = await fetch(url, {
    method: init.method,
    signal,
    headers: { accept: 'application/json', ...(contentType ? { 'content-type': contentType } : {}), ...init.headers },
    ...(payload !== undefined ? { body: payload } : {}),
  });
  if (res.status === 429 || res.status === 503) {
    const ra = Number(res.headers.get('retry-after'));
    await res.body?.cancel();
    throw new RetryableError(`service answered ${res.status}`, Number.isFinite(ra) ? ra * 1000 : undefined, {
      status: res.status,
    });
  }
  if (res.status >= 500) {
    // The body is not read into the error: a service's error text can echo the request (an email, the customer's
    // words), and the error's details become ledger evidence and log fields. The status is what a reconciliation
    // acts on.
    await res.body?.cancel();
    throw new OutcomeUnknownError(`service answered ${res.status}`, { status: res.status });
  }
  const text = await res.text();
  let body: unknown;
  try {
    body = text.length > 0 ? JSON.parse(text) : undefined;
  } catch (err) {
    throw new OutcomeUnknownError(
      `malformed response (${res.status})`,
      { status: res.status, reason: 'malformed' },
      { cause: err },
    );
  }
  return { status: res.status, headers: res.headers, body };
}
