/**
 * A local OpenAI Chat Completions server (POST /v1/chat/completions), in the
 * documented wire format: a `chat.completion` object, or with `stream: true`
 * `chat.completion.chunk` SSE events ending in `data: [DONE]`, with the usage
 * chunk (`choices: []`) when `stream_options.include_usage` is set. Errors are
 * OpenAI's `{ error: { message, type, param, code } }` with `Retry-After` as given.
 * With `limits`, the server holds a requests- and tokens-per-minute limit of its own
 * (./rateLimit.ts) the way OpenAI does: x-ratelimit-* headers on every answer, and past
 * the limit a 429 `rate_limit_exceeded` with `retry-after` (seconds) and `retry-after-ms`.
 */
import type { ServerResponse } from 'node:http';
import {
  startModelServer,
  sse,
  type ModelServer,
  type RecordedRequest,
  type RenderedReply,
  type TurnReply,
} from './queue.js';
import { limitHeaders, resetText, ServerRateLimit, type Admission, type ServerLimits } from './rateLimit.js';

export type { ModelServer, Reply } from './queue.js';
export type { ServerLimits } from './rateLimit.js';

export interface OpenAIServer extends ModelServer {
  /** Requests refused with a 429 by the server's own limit (scripted 429s not counted). */
  limited: number;
}

export async function startOpenAIServer(opts: { limits?: ServerLimits } = {}): Promise<OpenAIServer> {
  let n = 0;
  const limit = opts.limits ? new ServerRateLimit(opts.limits) : undefined;
  const counts = { limited: 0 };
  const gate = limit
    ? (reply: RenderedReply, req: RecordedRequest, res: ServerResponse) => {
        const refused = !answerLimit(limit.admit(tokensOf(reply)), req, res);
        if (refused) counts.limited++;
        return refused;
      }
    : undefined;
  const server = await startModelServer(
    '/v1/chat/completions',
    (reply, req, res) => render(reply, req, res, ++n),
    gate,
  );
  return Object.defineProperty(server, 'limited', { get: () => counts.limited, enumerable: true }) as OpenAIServer;
}

/** What a reply costs the tokens-per-minute limit: its usage (an error costs a request only). */
function tokensOf(reply: RenderedReply): number {
  return reply.kind === 'turn' && reply.usage ? reply.usage.input + reply.usage.output : 0;
}

/** Sets the x-ratelimit-* headers; past the limit answers the 429 itself and returns false. */
function answerLimit(a: Admission, req: RecordedRequest, res: ServerResponse): boolean {
  for (const [k, v] of Object.entries(limitHeaders(a.state))) res.setHeader(k, v);
  if (a.ok) return true;
  const limit = a.kind === 'requests' ? a.state.limitRequests : a.state.limitTokens;
  const unit = a.kind === 'requests' ? 'requests per min (RPM)' : 'tokens per min (TPM)';
  const message =
    `Rate limit reached for ${String(req.body.model)} in organization org-local on ${unit}: ` +
    `Limit ${limit}, Requested ${a.requested}. Please try again in ${resetText(a.waitMs)}. ` +
    'Visit https://platform.openai.com/account/rate-limits to learn more.';
  res
    .writeHead(429, {
      'content-type': 'application/json',
      'retry-after': String(Math.max(1, Math.ceil(a.waitMs / 1000))),
      'retry-after-ms': String(a.waitMs),
    })
    .end(JSON.stringify({ error: { message, type: a.kind, param: null, code: 'rate_limit_exceeded' } }));
  return false;
}

const ERRORS: Record<number, { type: string; code: string | null; message: string }> = {
  429: { type: 'requests', code: 'rate_limit_exceeded', message: 'Rate limit reached for requests' },
  500: { type: 'server_error', code: null, message: 'The server had an error while processing your request.' },
  503: { type: 'server_error', code: null, message: 'The engine is currently overloaded, please try again later' },
  400: { type: 'invalid_request_error', code: null, message: 'Invalid request' },
  401: { type: 'invalid_request_error', code: 'invalid_api_key', message: 'Incorrect API key provided' },
};

function render(reply: RenderedReply, req: RecordedRequest, res: ServerResponse, n: number): void {
  if (reply.kind === 'raw') {
    res.writeHead(reply.status, { 'content-type': 'application/json' }).end(JSON.stringify(reply.body));
    return;
  }
  if (reply.kind === 'error') {
    const e = ERRORS[reply.status] ?? { type: 'server_error', code: null, message: `status ${reply.status}` };
    res
      .writeHead(reply.status, {
        'content-type': 'application/json',
        ...(reply.retryAfter !== undefined ? { 'retry-after': reply.retryAfter } : {}),
      })
      .end(JSON.stringify({ error: { message: e.message, type: e.type, param: null, code: e.code } }));
    return;
  }
  const id = `chatcmpl-${n}`;
  const model = String(req.body.model);
  const created = Math.floor(req.at / 1000);
  const calls = (reply.toolCalls ?? []).map((c, i) => ({
    id: c.id ?? `call_${n}_${i}`,
    type: 'function' as const,
    function: { name: c.name, arguments: JSON.stringify(c.args) },
  }));
  const finish = calls.length > 0 ? 'tool_calls' : 'stop';
  const usage = reply.usage
    ? {
        prompt_tokens: reply.usage.input,
        completion_tokens: reply.usage.output,
        total_tokens: reply.usage.input + reply.usage.output,
        // OpenAI counts cached tokens inside prompt_tokens.
        ...(reply.usage.cached ? { prompt_tokens_details: { cached_tokens: reply.usage.cached } } : {}),
      }
    : undefined;
  if (req.body.stream === true) {
    streamTurn(res, reply, {
      id,
      model,
      created,
      calls,
      finish,
      usage,
      includeUsage: (req.body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true,
    });
    return;
  }
  res.writeHead(200, { 'content-type': 'application/json' }).end(
    JSON.stringify({
      id,
      object: 'chat.completion',
      created,
      model,
      system_fingerprint: 'fp_local',
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: reply.text ?? null,
            refusal: null,
            ...(calls.length > 0 ? { tool_calls: calls } : {}),
          },
          logprobs: null,
          finish_reason: finish,
        },
      ],
      ...(usage ? { usage } : {}),
    }),
  );
}

function streamTurn(
  res: ServerResponse,
  reply: TurnReply,
  t: {
    id: string;
    model: string;
    created: number;
    calls: { id: string; function: { name: string; arguments: string } }[];
    finish: string;
    usage: object | undefined;
    includeUsage: boolean;
  },
): void {
  const chunk = (choices: unknown[], extra: object = {}) =>
    `data: ${JSON.stringify({ id: t.id, object: 'chat.completion.chunk', created: t.created, model: t.model, system_fingerprint: 'fp_local', choices, ...extra })}\n\n`;
  const events = [
    chunk([{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }]),
  ];
  // Text in small pieces, as a model writes it.
  for (const piece of (reply.text ?? '').match(/.{1,8}/gs) ?? []) {
    events.push(chunk([{ index: 0, delta: { content: piece }, logprobs: null, finish_reason: null }]));
  }
  for (const [i, c] of t.calls.entries()) {
    events.push(
      chunk([
        {
          index: 0,
          delta: {
            tool_calls: [{ index: i, id: c.id, type: 'function', function: { name: c.function.name, arguments: '' } }],
          },
          logprobs: null,
          finish_reason: null,
        },
      ]),
    );
    for (const piece of c.function.arguments.match(/.{1,16}/gs) ?? []) {
      events.push(
        chunk([
          {
            index: 0,
            delta: { tool_calls: [{ index: i, function: { arguments: piece } }] },
            logprobs: null,
            finish_reason: null,
          },
        ]),
      );
    }
  }
  events.push(chunk([{ index: 0, delta: {}, logprobs: null, finish_reason: t.finish }]));
  // The usage chunk: empty choices, the whole request's usage (only when asked for, and only when the reply has one).
  if (t.includeUsage && t.usage) events.push(chunk([], { usage: t.usage }));
  events.push('data: [DONE]\n\n');
  sse(res, events, reply.truncateAfterEvents, reply.eventDelayMs);
}
