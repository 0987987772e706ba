/**
 * A signed webhook posted as a support system would: the body signed by the client's own `signWebhook`, so the
 * tests sign the way a team's tests are told to.
 */
import { signWebhook } from '../../src/client/index.js';

export async function postSigned(
  url: string,
  secret: string,
  body: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const raw = JSON.stringify(body);
  const res = await fetch(url, { method: 'POST', body: raw, headers: signWebhook(secret, raw) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}
