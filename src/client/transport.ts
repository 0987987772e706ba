/**
 * JSON over HTTP with the client's one retry rule: an answer that says "come back" (503 store_unavailable or
 * store_full, with its Retry-After) is asked again for every call, since the API decided nothing; a request that got no answer at all (a
 * refused or reset connection, a timeout) is asked again only when the call is safe to repeat: a read, or a write
 * the API tells apart from a new one (a run's creation, by its Idempotency-Key or without one by its subject; an
 * event's delivery, by its eventId), sent again as it was.
 */
import { errorOf, StoreUnavailable, Unreachable, type ErrorBody } from './errors.js';

export interface RetryOptions {
  /** Attempts in all, the first included (default 6). */
  attempts?: number;
  /** The longest wait between two attempts, whatever Retry-After says (default 5000 ms). */
  maxDelayMs?: number;
  /** The first wait after a connection error, doubled each time (default 100 ms). */
  baseDelayMs?: number;
}

export interface TransportOptions {
  /** The API's base URL, e.g. http://127.0.0.1:3000. */
  url: string;
  /** The bearer token (producer, tenant or operator). */
  token?: string | undefined;
  retry?: RetryOptions;
  /** A request with no answer within this fails (default 30000 ms); event streams have no such limit. */
  requestTimeoutMs?: number;
  /** The fetch to use (default the global one). */
  fetch?: typeof fetch;
}

/** What a connection error may do: `repeat` asks again, `fail` throws Unreachable at once. */
export type OnNoAnswer = 'repeat' | 'fail';

export interface Call {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
  onNoAnswer: OnNoAnswer;
  signal?: AbortSignal | undefined;
}

export interface Answer<T> {
  status: number;
  body: T;
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(t);
        reject(signal.reason as Error);
      },
      { once: true },
    );
  });

export class Transport {
  readonly base: string;
  private readonly token: string | undefined;
  private readonly attempts: number;
  private readonly maxDelayMs: number;
  private readonly baseDelayMs: number;
  private readonly timeoutMs: number;
  private readonly fetch: typeof fetch;

  constructor(opts: TransportOptions) {
    // fetch refuses a URL with a user or password in it, and every message about the URL would print them.
    const url = new URL(opts.url);
    if (url.username || url.password)
      throw new TypeError('url: a user or password in the API URL is never sent; give the bearer token instead');
    this.base = opts.url.replace(/\/+$/, '');
    this.token = opts.token === '' ? undefined : opts.token;
    this.attempts = Math.max(1, opts.retry?.attempts ?? 6);
    this.maxDelayMs = opts.retry?.maxDelayMs ?? 5000;
    this.baseDelayMs = opts.retry?.baseDelayMs ?? 100;
    this.timeoutMs = opts.requestTimeoutMs ?? 30_000;
    this.fetch = opts.fetch ?? globalThis.fetch;
  }

  get tokenSent(): boolean {
    return this.token !== undefined;
  }

  headers(extra: Record<string, string> = {}): Record<string, string> {
    return { ...(this.token ? { authorization: `Bearer ${this.token}` } : {}), ...extra };
  }

  /** The wait before attempt `n + 1` after a connection error: capped exponential, with jitter. */
  backoffMs(n: number): number {
    const capped = Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** n);
    return capped / 2 + Math.random() * (capped / 2);
  }

  /** Retry-After (seconds) in ms, capped; 1 s when the answer gave none (or one that is not a number of seconds). */
  retryAfterMs(res: Response): number {
    const header = res.headers.get('retry-after');
    const s = header === null || header.trim() === '' ? NaN : Number(header);
    return Math.min(this.maxDelayMs, Number.isFinite(s) && s >= 0 ? s * 1000 : 1000);
  }

  /** One call, asked again as the rule above says; a 2xx answer's JSON, else the typed error. */
  async json<T>(call: Call): Promise<Answer<T>> {
    let lastStore: StoreUnavailable | undefined;
    for (let attempt = 0; ; attempt++) {
      const last = attempt + 1 >= this.attempts;
      let res: Response;
      let text: string;
      try {
        res = await this.send(call);
        // The body is part of the answer: a timeout or a reset while it arrives is no answer either.
        text = await res.text();
      } catch (err) {
        if (call.signal?.aborted) throw err;
        if (call.onNoAnswer === 'fail' || last)
          throw new Unreachable(this.base, { cause: err, timeoutMs: isTimeout(err) ? this.timeoutMs : undefined });
        await sleep(this.backoffMs(attempt), call.signal);
        continue;
      }
      const body = parse(text, res.status);
      if (res.ok) return { status: res.status, body: body as T };
      const error = errorOf(res.status, body, this.retryAfterMs(res), this.tokenSent);
      if (!(error instanceof StoreUnavailable) || last) throw error;
      lastStore = error;
      await sleep(lastStore.retryAfterMs, call.signal);
    }
  }

  /** The raw response of one attempt (event streams read it themselves). */
  async send(call: Pick<Call, 'method' | 'path' | 'body' | 'headers' | 'signal'>, timeout = true): Promise<Response> {
    const signals = [call.signal, timeout ? AbortSignal.timeout(this.timeoutMs) : undefined].filter(
      (s): s is AbortSignal => s !== undefined,
    );
    return this.fetch(`${this.base}${call.path}`, {
      method: call.method,
      headers: this.headers({
        ...(call.body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...call.headers,
      }),
      ...(call.body !== undefined ? { body: JSON.stringify(call.body) } : {}),
      ...(signals.length ? { signal: AbortSignal.any(signals) } : {}),
    });
  }
}

/** The request timeout's abort (AbortSignal.timeout), as fetch or the body's read rejects with it. */
function isTimeout(err: unknown): boolean {
  return err instanceof Error && err.name === 'TimeoutError';
}

/** A body that is not JSON (a proxy's page) is kept as its message. */
function parse(text: string, status: number): ErrorBody {
  if (!text) return {};
  try {
    const v = JSON.parse(text) as unknown;
    return typeof v === 'object' && v !== null ? (v as ErrorBody) : { value: v };
  } catch {
    return { error: `http_${status}`, message: text.slice(0, 200) };
  }
}
