/**
 * The client's errors: one class per answer a caller branches on, each with the API's `code` (the body's `error`),
 * the HTTP `status` and the body itself. A refusal that names fields (400) carries them; a conflict that names the
 * subject's later run (409 run_superseded) or a child's parent (409 parent_moved_on) carries its id; a store that is
 * away (503 store_unavailable) says how long the API asked to wait. Anything else the API refuses is a FleetApiError
 * with its code.
 */

/** A field the API named in a 400 (`path` as the API spells it: `input.ticket.subject`, `Idempotency-Key`). */
export interface FieldError {
  path: string;
  message: string;
}

/** The JSON body of a refusal: its code, a message, and what else the API said (fields, limits, run ids). */
export type ErrorBody = { error?: string; message?: string } & Record<string, unknown>;

/** Any answer of the API outside 2xx. */
export class FleetApiError extends Error {
  override readonly name: string = 'FleetApiError';
  constructor(
    /** The API's code: the body's `error` (e.g. `not_found`, `run_superseded`), or `http_<status>`. */
    readonly code: string,
    readonly status: number,
    readonly body: ErrorBody,
    message?: string,
  ) {
    super(message ?? body.message ?? `${status} ${code}`);
  }
}

/** 404: no such run or action (an unknown, malformed or another tenant's id: the API does not tell them apart). */
export class RunNotFound extends FleetApiError {
  override readonly name = 'RunNotFound';
}

/** 400: the request was refused and nothing was written; `fields` names each field at fault. */
export class InvalidRequest extends FleetApiError {
  override readonly name = 'InvalidRequest';
  readonly fields: FieldError[];
  constructor(code: string, status: number, body: ErrorBody) {
    const fields = Array.isArray(body.fields) ? (body.fields as FieldError[]) : [];
    super(code, status, body, body.message ?? fields.map((f) => `${f.path}: ${f.message}`).join('; '));
    this.fields = fields;
  }
}

/**
 * 409: refused in the run's present state (already finished, superseded, not pending...). `laterRunId` is the
 * subject's later run when the API names one: that is the run that goes on. `parentRunId` is a child run's parent
 * when the API names one (`parent_moved_on`: the parent took the child's outcome and moved on, so the child is not
 * put back to work).
 */
export class Conflict extends FleetApiError {
  override readonly name = 'Conflict';
  readonly laterRunId: string | undefined;
  readonly parentRunId: string | undefined;
  constructor(code: string, status: number, body: ErrorBody) {
    super(code, status, body);
    this.laterRunId = typeof body.laterRunId === 'string' ? body.laterRunId : undefined;
    this.parentRunId = typeof body.parentRunId === 'string' ? body.parentRunId : undefined;
  }
}

/**
 * 401 or 403: no credential, one the API does not know, or one that may not do this. `tokenSent` tells "no token
 * given" from "the token given was refused".
 */
export class Unauthorized extends FleetApiError {
  override readonly name = 'Unauthorized';
  constructor(
    code: string,
    status: number,
    body: ErrorBody,
    readonly tokenSent: boolean,
  ) {
    super(code, status, body);
  }
}

/** 503 auth_not_configured: the route is off until the server's credential setting (named in the message) is set. */
export class AuthNotConfigured extends FleetApiError {
  override readonly name = 'AuthNotConfigured';
}

/**
 * 503 store_unavailable: the API's store is failing over or unreachable; 503 store_full (the `code`): its Redis is at
 * its memory limit and refused the write. Nothing was decided either way. Thrown once the client's retries are spent
 * (`retryAfterMs`: the API's last Retry-After).
 */
export class StoreUnavailable extends FleetApiError {
  override readonly name = 'StoreUnavailable';
  constructor(
    code: string,
    status: number,
    body: ErrorBody,
    readonly retryAfterMs: number,
  ) {
    super(code, status, body);
  }
}

/**
 * 429: the API refused for now and wrote nothing (`kept_deliveries_limit`: the tenant keeps as many undelivered
 * events as it may; `tenant_line_full`: the tenant has as many runs waiting to start as it may). Not asked again by the client: `retryAfterMs` is the wait the API asked for, the call's to honour.
 */
export class TooManyRequests extends FleetApiError {
  override readonly name = 'TooManyRequests';
  constructor(
    code: string,
    status: number,
    body: ErrorBody,
    readonly retryAfterMs: number,
  ) {
    super(code, status, body);
  }
}

/**
 * No answer at all: the API could not be reached (refused, reset, DNS), or took the request and did not answer within
 * the request timeout (`timeoutMs` set), after the client's retries.
 */
export class Unreachable extends Error {
  override readonly name = 'Unreachable';
  readonly code = 'unreachable';
  /** The request timeout the last attempt ran out of; undefined when the connection itself failed. */
  readonly timeoutMs: number | undefined;
  constructor(
    readonly url: string,
    options: { cause: unknown; timeoutMs?: number | undefined },
  ) {
    super(
      options.timeoutMs === undefined
        ? `cannot reach ${url}: ${causeText(options.cause)}`
        : `no answer from ${url} within ${options.timeoutMs / 1000} s`,
      { cause: options.cause },
    );
    this.timeoutMs = options.timeoutMs;
  }
}

function causeText(cause: unknown): string {
  const inner = (cause as { cause?: { code?: unknown; message?: unknown } } | undefined)?.cause;
  if (inner && typeof inner.code === 'string') return inner.code;
  if (inner && typeof inner.message === 'string') return inner.message;
  return cause instanceof Error ? cause.message : String(cause);
}

/** The typed error of a non-2xx answer. */
export function errorOf(status: number, body: ErrorBody, retryAfterMs: number, tokenSent: boolean): FleetApiError {
  const code = typeof body.error === 'string' ? body.error : `http_${status}`;
  if (status === 404) return new RunNotFound(code, status, body);
  if (status === 400) return new InvalidRequest(code, status, body);
  if (status === 409) return new Conflict(code, status, body);
  if (status === 401 || status === 403) return new Unauthorized(code, status, body, tokenSent);
  if (status === 503 && code === 'auth_not_configured') return new AuthNotConfigured(code, status, body);
  if (status === 503 && (code === 'store_unavailable' || code === 'store_full'))
    return new StoreUnavailable(code, status, body, retryAfterMs);
  if (status === 429) return new TooManyRequests(code, status, body, retryAfterMs);
  return new FleetApiError(code, status, body);
}
