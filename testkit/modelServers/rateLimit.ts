/**
 * A provider's own rate limit, as OpenAI enforces it: requests and tokens per minute, each a bucket
 * that refills continuously at its limit and holds `burstMs` of refill (OpenAI holds a minute's
 * worth, but may enforce "60,000 RPM as 1,000 per second": a short burst makes a test see that).
 * A request past either bucket is refused whole (nothing taken) with how long until it would fit.
 */
export interface ServerLimits {
  /** Requests per minute (undefined: none). */
  rpm?: number | undefined;
  /** Tokens per minute, counted as the reply's usage (input + output) when the request is taken. */
  tpm?: number | undefined;
  /** How much refill each bucket holds, ms (default 60 000: a full minute, as OpenAI). */
  burstMs?: number | undefined;
}

export interface LimitState {
  limitRequests: number;
  limitTokens: number;
  remainingRequests: number;
  remainingTokens: number;
  /** Ms until each bucket is full again. */
  resetRequestsMs: number;
  resetTokensMs: number;
}

export type Admission =
  | { ok: true; state: LimitState }
  | { ok: false; kind: 'requests' | 'tokens'; waitMs: number; requested: number; state: LimitState };

class Bucket {
  private level: number;
  private at: number;
  constructor(
    readonly perMinute: number,
    private readonly capacity: number,
    now: number,
  ) {
    this.level = capacity;
    this.at = now;
  }

  /** Refills to `now`; the level after. */
  refill(now: number): number {
    this.level = Math.min(this.capacity, this.level + ((now - this.at) * this.perMinute) / 60_000);
    this.at = now;
    return this.level;
  }

  waitFor(n: number): number {
    return this.level >= n ? 0 : Math.ceil(((n - this.level) * 60_000) / this.perMinute);
  }

  take(n: number): void {
    this.level -= n;
  }

  resetMs(): number {
    return Math.ceil(((this.capacity - this.level) * 60_000) / this.perMinute);
  }
}

export class ServerRateLimit {
  private readonly requests: Bucket | undefined;
  private readonly tokens: Bucket | undefined;
  constructor(limits: ServerLimits, now = Date.now()) {
    const burst = (perMinute: number) => Math.max(1, (perMinute * (limits.burstMs ?? 60_000)) / 60_000);
    if (limits.rpm) this.requests = new Bucket(limits.rpm, burst(limits.rpm), now);
    if (limits.tpm) this.tokens = new Bucket(limits.tpm, burst(limits.tpm), now);
  }

  /** Takes one request and `tokens`, or refuses with the bucket that is short and the wait. */
  admit(tokens: number, now = Date.now()): Admission {
    this.requests?.refill(now);
    this.tokens?.refill(now);
    const reqWait = this.requests?.waitFor(1) ?? 0;
    const tokWait = this.tokens?.waitFor(Math.min(tokens, this.tokens.perMinute)) ?? 0;
    if (reqWait > 0) return { ok: false, kind: 'requests', waitMs: reqWait, requested: 1, state: this.state(now) };
    if (tokWait > 0) return { ok: false, kind: 'tokens', waitMs: tokWait, requested: tokens, state: this.state(now) };
    this.requests?.take(1);
    this.tokens?.take(tokens);
    return { ok: true, state: this.state(now) };
  }

  private state(now: number): LimitState {
    const r = this.requests;
    const t = this.tokens;
    return {
      limitRequests: r?.perMinute ?? 0,
      limitTokens: t?.perMinute ?? 0,
      remainingRequests: Math.max(0, Math.floor(r?.refill(now) ?? 0)),
      remainingTokens: Math.max(0, Math.floor(t?.refill(now) ?? 0)),
      resetRequestsMs: r?.resetMs() ?? 0,
      resetTokensMs: t?.resetMs() ?? 0,
    };
  }
}

/** OpenAI's duration form in x-ratelimit-reset-*: `6m0s`, `1s`, `120ms`. */
export function resetText(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.ceil(ms))}ms`;
  const s = ms / 1000;
  if (s < 60) return `${Number(s.toFixed(3))}s`;
  return `${Math.floor(s / 60)}m${Math.round(s % 60)}s`;
}

/** The x-ratelimit-* headers OpenAI sends on every answer. */
export function limitHeaders(st: LimitState): Record<string, string> {
  return {
    'x-ratelimit-limit-requests': String(st.limitRequests),
    'x-ratelimit-limit-tokens': String(st.limitTokens),
    'x-ratelimit-remaining-requests': String(st.remainingRequests),
    'x-ratelimit-remaining-tokens': String(st.remainingTokens),
    'x-ratelimit-reset-requests': resetText(st.resetRequestsMs),
    'x-ratelimit-reset-tokens': resetText(st.resetTokensMs),
  };
}
