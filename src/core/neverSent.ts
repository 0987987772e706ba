/**
 * Whether a request failed before any byte of it could reach the service: the
 * connection was never made (refused, the name did not resolve, the connect
 * timed out). Only these prove "not sent"; a reset, a closed socket or a
 * timeout after the connection was made may follow a request the service
 * processed. A leaf module: anything may import it.
 */

/** Error codes of a connection that was never established (Node's net/dns and undici's connect timeout). */
const NOT_CONNECTED_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT']);

interface Coded {
  code?: unknown;
  cause?: unknown;
  errors?: unknown;
}

/**
 * The connection to the service was never made, so the request never left: `err` or a cause of it carries one
 * of the codes above. An AggregateError (one connect attempt per address of the host) counts only when every
 * attempt failed that way.
 */
export function connectFailed(err: unknown, depth = 0): boolean {
  if (typeof err !== 'object' || err === null || depth > 4) return false;
  const e = err as Coded;
  if (typeof e.code === 'string' && NOT_CONNECTED_CODES.has(e.code)) return true;
  if (Array.isArray(e.errors) && e.errors.length > 0 && e.errors.every((x) => connectFailed(x, depth + 1))) return true;
  return connectFailed(e.cause, depth + 1);
}
