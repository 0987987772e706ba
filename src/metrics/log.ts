/** pino loggers: structured, outcomes as codes, customer text and secrets redacted. * Decision record 0010: docs/decisions/0010-logs-never-carry-customer-text.md.
 */
import { isAgentCodeError } from '../core/agentCode.js';
import { codedDetails, isCodedField, isCodedString } from '../core/errors.js';
import { pino, stdSerializers, type DestinationStream, type Logger } from 'pino';

export const REDACT_PATHS = [
  'ticket.body',
  'ticket.subject',
  'ticket.customer',
  '*.ticket.body',
  '*.ticket.customer',
  // A run's input and the prompt built from it are the customer's text, whatever the agent.
  'input',
  '*.input',
  'prompt',
  '*.prompt',
  'args.body',
  'args.to',
  'args.subject',
  'headers.authorization',
  'authorization',
  '*.apiKey',
  'apiKey',
  'OPENAI_API_KEY',
  'ANTHROPIC_API_KEY',
  'OPENAI_COMPATIBLE_API_KEY',
  'PRODUCER_TOKEN',
  'OPERATOR_TOKEN',
  'METRICS_TOKEN',
  'BULL_BOARD_PASSWORD',
  'CONSOLE_SESSION_SECRET',
  'OIDC_PUBLIC_KEY',
];

/**
 * scheme://[userinfo@]host[:port] followed by a path, query or fragment. The
 * host part stops at the first `/ ? #`, whitespace, quote or bracket.
 */
const URL_IN_TEXT =
  /\b([a-z][a-z0-9+.-]{1,20}:\/\/)([^\s/?#"'<>()[\]{}]*@)?([^\s/?#"'<>()[\]{}@]+)([/?#][^\s"'<>()[\]{}]*)?/gi;

/**
 * Keeps scheme://host of every URL in `text` and replaces credentials and any
 * path or query (`/v1/customers/ada@example.com`, `?email=...`) by [redacted]:
 * tool and HTTP errors quote the URL they called, and its path and query carry
 * customer data.
 */
export function redactUrls(text: string): string {
  return text.replace(
    URL_IN_TEXT,
    (_m, scheme: string, userinfo: string | undefined, host: string, rest: string | undefined) => {
      // Prose punctuation after a URL ("... failed: <url>: 500") stays.
      const punct = /[.,:;!]+$/.exec(rest ?? '')?.[0] ?? '';
      const path = (rest ?? '').slice(0, (rest ?? '').length - punct.length);
      const tail = path === '' || path === '/' ? path : '/[redacted]';
      return `${scheme}${userinfo ? '[redacted]@' : ''}${host}${tail}${punct}`;
    },
  );
}

function redactDeep(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return redactUrls(value);
  if (depth > 8 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((v) => redactDeep(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = redactDeep(v, depth + 1);
  return out;
}

/**
 * Fields an error carries that quote the data of the statement or command that failed, dropped from every error
 * whoever threw it: PostgreSQL's `where` (the JSON or the parameter being read, e.g. `JSON data, line 1: ...<the
 * customer's text>`), `detail` (`Key (id)=(...)`, `Failing row contains (...)`, the token of bad JSON), `hint`,
 * `internalQuery` and the positions in them; a query's text and values where a client attaches them.
 */
const DATA_FIELDS = new Set([
  'where',
  'detail',
  'hint',
  'internalQuery',
  'internalPosition',
  'position',
  'query',
  'sql',
  'parameters',
  'params',
  'values',
]);

/**
 * A PostgreSQL error as the `pg` client raises it (its DatabaseError): a SQLSTATE `code` (five characters) and a
 * `severity`. Told by shape, so a copy of pg other than ours (or a serialized one) is recognised too.
 */
function isDatabaseError(err: object): err is { code: string; severity: string; message?: unknown } {
  const e = err as { code?: unknown; severity?: unknown };
  return typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code) && typeof e.severity === 'string';
}

/**
 * A PostgreSQL message with what it quotes replaced: a value that does not parse (`invalid input syntax for type
 * integer: "<value>"`), the bytes of a bad encoding (`invalid byte sequence for encoding "UTF8": 0x00`), and with them
 * the names it quotes (the error's `table`, `column`, `constraint` fields, kept, name those). From the first quote
 * to the last: a value holding a quote leaks nothing either.
 */
export function redactDatabaseMessage(message: string): string {
  return message
    .replace(/"[\s\S]*"/, '"[redacted]"')
    .replace(/'[\s\S]*'/, "'[redacted]'")
    .replace(/\b0x[0-9a-f]{2}(?: 0x[0-9a-f]{2})*/gi, '0x[redacted]');
}

const MAX_CAUSES = 8;

/** What a log line shows for the message of an error out of agent code (src/core/agentCode.ts). */
export const AGENT_MESSAGE_NOT_LOGGED = '[not logged: agent code]';

/**
 * The fields of an error out of agent code a log line keeps besides its type, stack frames and causes: its `details`
 * by CODED_DETAILS, and fields that are a number, a boolean or a coded string (isCodedString) under a key
 * CODED_DETAILS names (`code`, `status`, ...) or one of these (an AgentError's `retry`, a RetryableError's
 * `retryAfterMs`, a system error's `errno` and `syscall`, an error's own `name`). Anything else an agent's error
 * carries (the address it failed for, the service's answer) is dropped, whatever its name.
 */
const AGENT_ERROR_FIELDS = new Set(['retry', 'retryAfterMs', 'errno', 'syscall', 'name']);

function agentErrorField(key: string, v: unknown): boolean {
  const coded = typeof v === 'number' || typeof v === 'boolean' || isCodedString(v);
  return coded && (AGENT_ERROR_FIELDS.has(key) || isCodedField(key, v));
}

/**
 * An error's stack with its header (V8's `<name>: <message>`, several lines for a message of several) replaced by
 * `<name>: AGENT_MESSAGE_NOT_LOGGED`: its frames (the `    at ...` lines) only.
 */
function framesOf(err: Error): string {
  const frames = (err.stack ?? '').split('\n').filter((l) => /^\s+at\s/.test(l));
  const name = isCodedString(err.name) && err.name !== '' ? err.name : 'Error';
  return [`${name}: ${AGENT_MESSAGE_NOT_LOGGED}`, ...frames].join('\n');
}

/**
 * A copy of `err` for logging (the original, maybe thrown on, is left as it is): no DATA_FIELDS; a database error's
 * message, and its stack that repeats it, redacted (redactDatabaseMessage); an ioredis error's command by its name
 * only (its args are the keys and values written); its details by CODED_DETAILS; an object of a class by its name
 * (isInstance); the same for its cause and the errors among its fields.
 * An error out of agent code (`fromAgent`: marked by src/core/agentCode.ts, or the cause or a field of one) keeps no
 * message (AGENT_MESSAGE_NOT_LOGGED), its stack's frames only, and of its fields the coded ones (agentErrorField);
 * a cause of it that is not an Error is dropped.
 */
function withoutData(err: Error, depth = 0, fromAgent = isAgentCodeError(err)): Error {
  const copy = Object.create(Object.getPrototypeOf(err) as object | null) as Error;
  let { message, stack } = err;
  if (fromAgent) {
    message = AGENT_MESSAGE_NOT_LOGGED;
    stack = framesOf(err);
  } else if (isDatabaseError(err)) {
    message = redactDatabaseMessage(err.message);
    // The stack's first line repeats the message: replaced where found, else the whole stack redacted.
    if (stack !== undefined)
      stack =
        err.message !== '' && stack.includes(err.message)
          ? stack.split(err.message).join(message)
          : redactDatabaseMessage(stack);
  }
  const own = (key: string, value: unknown, enumerable: boolean) =>
    Object.defineProperty(copy, key, { value, enumerable, writable: true, configurable: true });
  own('message', message, false);
  own('stack', stack, false);
  const sanitize = (v: unknown): unknown => {
    if (!(v instanceof Error)) return v;
    const agentText = fromAgent || isAgentCodeError(v);
    if (depth < MAX_CAUSES) return withoutData(v, depth + 1, agentText);
    return agentText ? undefined : v;
  };
  for (const [key, v] of Object.entries(err)) {
    if (DATA_FIELDS.has(key) || key === 'message' || key === 'stack') continue;
    let value: unknown = Array.isArray(v) ? v.map(sanitize) : sanitize(v);
    if (key === 'command' && v !== null && typeof v === 'object') {
      const name = (v as { name?: unknown }).name;
      value = typeof name === 'string' ? { name } : undefined;
    }
    if (key === 'details' && v !== null && typeof v === 'object' && !Array.isArray(v))
      value = codedDetails(v as object);
    else if (isInstance(v)) value = { type: (v as object).constructor.name };
    else if (fromAgent && !(v instanceof Error) && !(Array.isArray(v) && v.every((e) => e instanceof Error)))
      value = agentErrorField(key, v) ? v : undefined;
    if (value !== undefined) own(key, value, true);
  }
  // A cause is often not enumerable (new Error(m, { cause })).
  if (err.cause !== undefined && (!fromAgent || err.cause instanceof Error)) own('cause', sanitize(err.cause), false);
  return copy;
}

/**
 * A field holding an object of some class other than an Error (a database error's `client`, a socket): logged by its
 * class name only. Its fields are a connection's state, its queued and active queries among them, with the values
 * they write.
 */
function isInstance(v: unknown): boolean {
  if (v === null || typeof v !== 'object' || v instanceof Error || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v) as object | null;
  return proto !== null && proto !== Object.prototype;
}

/**
 * pino's error serializer (type, message, stack, cause chain, own fields) of the error without the data its fields
 * quote (withoutData), then URL redaction over every string of the result. A bare string under `err` (a call site
 * that logged `err.message`) is redacted too; an object out of agent code that is not an Error by its class only.
 */
export function errSerializer(err: unknown): unknown {
  if (err instanceof Error) return redactDeep(stdSerializers.err(withoutData(err)));
  if (isAgentCodeError(err)) return { type: typeName(err) };
  return redactDeep(err);
}

function typeName(v: unknown): string {
  const name = (v as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof name === 'string' && name !== '' ? name : typeof v;
}

export function createLogger(name: string, level: string, destination?: DestinationStream): Logger {
  const options = {
    name,
    level,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    base: { service: name },
    serializers: { err: errSerializer },
  };
  return destination ? pino(options, destination) : pino(options);
}
