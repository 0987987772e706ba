/** pino loggers: structured, outcomes as codes, customer text and secrets redacted. * Decision record 0010: docs/decisions/0010-logs-never-carry-customer-text.md.
 */
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
 * pino's error serializer (type, message, stack, cause chain, own fields), then
 * URL redaction over every string of the result. A bare string under `err`
 * (a call site that logged `err.message`) is redacted too.
 */
export function errSerializer(err: unknown): unknown {
  if (err instanceof Error) return redactDeep(stdSerializers.err(err));
  return redactDeep(err);
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
