/**
 * Signed webhook requests for a team's own tests: the headers the intake checks (src/producer/webhookSignature.ts),
 * made the same way, so a test can post to /webhooks/<hook>/<tenant> exactly as the support system would.
 */
import { sign, SIGNATURE_HEADER, TIMESTAMP_HEADER } from '../producer/webhookSignature.js';

export { SIGNATURE_HEADER, TIMESTAMP_HEADER };

/**
 * The headers of a signed webhook: base64(HMAC-SHA256(secret, timestamp + body)) and its timestamp (Unix seconds,
 * now by default; the API refuses one outside WEBHOOK_TOLERANCE_S). Send `body` byte for byte as signed.
 *
 * @example
 * const body = JSON.stringify({ v: 1, eventId: 'evt-1', ticket });
 * await fetch(`${url}/webhooks/tickets/acme`, { method: 'POST', body, headers: signWebhook(secret, body) });
 */
export function signWebhook(
  secret: string,
  body: string | Buffer,
  timestamp: string = String(Math.floor(Date.now() / 1000)),
): Record<string, string> {
  return {
    'content-type': 'application/json',
    [SIGNATURE_HEADER]: sign(secret, timestamp, body),
    [TIMESTAMP_HEADER]: timestamp,
  };
}
