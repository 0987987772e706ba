/**
 * `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP-date. Returns the
 * wait in ms from `nowMs`, or undefined when the header is absent or neither
 * form parses (the caller then uses its own backoff). A date in the past is 0.
 * No cap here: the caller bounds the wait (the run's deadline, the outage window).
 */
export function parseRetryAfter(value: string | null | undefined, nowMs: number): number | undefined {
  if (value == null) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  // Only a date-like value: Date.parse would also read "12" or "1.5" as dates.
  if (!/[a-z]/i.test(v)) return undefined;
  const at = Date.parse(v);
  return Number.isFinite(at) ? Math.max(0, at - nowMs) : undefined;
}
