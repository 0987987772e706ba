/**
 * Zendesk-style webhook signatures: base64(HMAC-SHA256(secret, timestamp + rawBody)),
 * in X-Zendesk-Webhook-Signature, the timestamp in X-Zendesk-Webhook-Signature-Timestamp
 * (ISO 8601 as Zendesk sends it, or Unix seconds). Constant-time compare; a
 * timestamp outside the tolerance window is refused (replay protection).
 */
import { createHmac } from 'node:crypto';
import { sameSecret } from '../core/sameSecret.js';

export const SIGNATURE_HEADER = 'x-zendesk-webhook-signature';
export const TIMESTAMP_HEADER = 'x-zendesk-webhook-signature-timestamp';

export function sign(secret: string, timestamp: string, rawBody: Buffer | string): string {
  return createHmac('sha256', secret).update(timestamp).update(rawBody).digest('base64');
}

/** Milliseconds since the epoch, or undefined when the header is not a timestamp. */
export function parseTimestamp(value: string): number | undefined {
  if (/^\d{1,12}$/.test(value)) return Number(value) * 1000;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? undefined : ms;
}

export type SignatureCheck = 'ok' | 'missing' | 'bad_timestamp' | 'stale' | 'bad_signature';

export function checkSignature(
  secret: string,
  signature: string | undefined,
  timestamp: string | undefined,
  rawBody: Buffer,
  nowMs: number,
  toleranceS: number,
): SignatureCheck {
  if (!signature || !timestamp) return 'missing';
  const at = parseTimestamp(timestamp);
  if (at === undefined) return 'bad_timestamp';
  if (Math.abs(nowMs - at) > toleranceS * 1000) return 'stale';
  const expected = Buffer.from(sign(secret, timestamp, rawBody), 'base64');
  const given = Buffer.from(signature, 'base64');
  return sameSecret(given, expected) ? 'ok' : 'bad_signature';
}
