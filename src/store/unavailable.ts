/**
 * Whether an error means the store cannot take the request now, and a retry later can succeed: the connection is
 * lost or not yet back, the master is gone or demoted (a failover), the server is loading its data, a Cluster slot
 * has no master, or a write was not replicated in time. Callers answer 503 with Retry-After, never 500.
 */
import { NotReplicatedError } from './replicated.js';
import { RedisUnreachable } from './connect.js';

/** Error replies Redis sends while it cannot serve (ioredis keeps the reply's first word as the message's start). */
// MOVED and ASK reach the engine only from a node's own connection (a replication wait) whose slot moved in a failover.
const UNAVAILABLE_REPLIES =
  /^(CLUSTERDOWN|READONLY|LOADING|MASTERDOWN|TRYAGAIN|NOREPLICAS|BUSY|NOTREADY|UNBLOCKED|MOVED|ASK)\b/;

/** ioredis's own errors when no connection can carry the command. */
const CONNECTION_ERRORS = [
  'Connection is closed',
  "Stream isn't writeable",
  'Too many Cluster redirections',
  'Failed to refresh slots cache',
  'None of startup nodes is available',
  "Cluster isn't ready",
  'All sentinels are unreachable',
  'Reached the max retries per request limit',
  // A pipeline in flight when the connection closed (ioredis aborts it rather than resend it): a replication wait.
  'Command aborted due to connection close',
];

const NET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

export function storeUnavailable(err: unknown): boolean {
  if (err instanceof NotReplicatedError || err instanceof RedisUnreachable) return true;
  if (!(err instanceof Error)) return false;
  const name = err.name;
  if (name === 'MaxRetriesPerRequestError' || name === 'ClusterAllFailedError') return true;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && NET_CODES.has(code)) return true;
  const msg = err.message;
  if (UNAVAILABLE_REPLIES.test(msg)) return true;
  // A MULTI whose commands were refused as queued (a demoted master's READONLY, a slot's CLUSTERDOWN) ends in
  // EXECABORT; ioredis keeps the refusals on the error. Unavailable when every refusal is.
  const previous = (err as { previousErrors?: unknown }).previousErrors;
  if (msg.startsWith('EXECABORT') && Array.isArray(previous) && previous.length > 0) {
    return previous.every(storeUnavailable);
  }
  if (CONNECTION_ERRORS.some((m) => msg.includes(m))) return true;
  return err.cause !== undefined && err.cause !== err && storeUnavailable(err.cause);
}

/**
 * Whether Redis refused a write because it is at `maxmemory` (the `noeviction` policy the processes require answers
 * `OOM command not allowed when used memory > 'maxmemory'`): nothing of the command was written, and a retry succeeds
 * once memory is freed (runs expire past RUN_RETENTION_MS, the archive lets them go) or raised. Also a MULTI whose
 * queued commands were refused so (EXECABORT), and an error caused by one.
 */
export function storeFull(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const msg = err.message;
  // A script's write refused so quotes the reply after its own prefix.
  if (msg.startsWith('OOM ') || msg.includes('OOM command not allowed')) return true;
  const previous = (err as { previousErrors?: unknown }).previousErrors;
  if (msg.startsWith('EXECABORT') && Array.isArray(previous) && previous.length > 0)
    return previous.some(storeFull) && previous.every((e) => storeFull(e) || storeUnavailable(e));
  return err.cause !== undefined && err.cause !== err && storeFull(err.cause);
}
