/** pino loggers: structured, outcomes as codes, customer text and secrets redacted. */
import { pino, type Logger } from 'pino';

export const REDACT_PATHS = [
  'ticket.body', 'ticket.subject', 'ticket.customer', '*.ticket.body', '*.ticket.customer',
  'args.body', 'args.to', 'args.subject', 'headers.authorization', 'authorization', '*.apiKey', 'apiKey',
  'OPENAI_API_KEY', 'PRODUCER_TOKEN', 'OPERATOR_TOKEN',
];

export function createLogger(name: string, level: string): Logger {
  return pino({ name, level, redact: { paths: REDACT_PATHS, censor: '[redacted]' }, base: { service: name } });
}
