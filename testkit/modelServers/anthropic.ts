/**
 * A local Anthropic Messages server (POST /v1/messages), in the documented wire
 * format: a `message` object with `text` and `tool_use` content blocks and
 * `usage`, or with `stream: true` the SSE events message_start,
 * content_block_start/delta/stop, message_delta (output usage), message_stop.
 * Errors are `{ type: 'error', error: { type, message } }` with `Retry-After` as given.
 */
import type { ServerResponse } from 'node:http';
import { startModelServer, sse, type ModelServer, type RecordedRequest, type RenderedReply } from './queue.js';

export type { ModelServer, Reply } from './queue.js';

export function startAnthropicServer(): Promise<ModelServer> {
  let n = 0;
  return startModelServer('/v1/messages', (reply, req, res) => render(reply, req, res, ++n));
}

const ERROR_TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  429: 'rate_limit_error',
  500: 'api_error',
  529: 'overloaded_error',
};

function render(reply: RenderedReply, req: RecordedRequest, res: ServerResponse, n: number): void {
  if (reply.kind === 'raw') {
    res.writeHead(reply.status, { 'content-type': 'application/json' }).end(JSON.stringify(reply.body));
    return;
  }
  if (reply.kind === 'error') {
    res
      .writeHead(reply.status, {
        'content-type': 'application/json',
        ...(reply.retryAfter !== undefined ? { 'retry-after': reply.retryAfter } : {}),
      })
      .end(
        JSON.stringify({
          type: 'error',
          error: { type: ERROR_TYPES[reply.status] ?? 'api_error', message: `status ${reply.status}` },
        }),
      );
    return;
  }
  const id = `msg_local_${n}`;
  const model = String(req.body.model);
  const content: (
    { type: 'text'; text: string } | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> }
  )[] = [];
  if (reply.text !== undefined) content.push({ type: 'text', text: reply.text });
  for (const [i, c] of (reply.toolCalls ?? []).entries())
    content.push({ type: 'tool_use', id: c.id ?? `toolu_${n}_${i}`, name: c.name, input: c.args });
  const stopReason = reply.toolCalls?.length ? 'tool_use' : 'end_turn';
  // Anthropic's input_tokens leaves out the tokens read from or written to the cache: they are counted apart.
  const cached = reply.usage?.cached ?? 0;
  const written = reply.usage?.cacheWrite ?? 0;
  const usage = reply.usage
    ? {
        input_tokens: reply.usage.input - cached - written,
        output_tokens: reply.usage.output,
        ...(cached ? { cache_read_input_tokens: cached } : {}),
        ...(written ? { cache_creation_input_tokens: written } : {}),
      }
    : undefined;
  if (req.body.stream !== true) {
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        id,
        type: 'message',
        role: 'assistant',
        model,
        content,
        stop_reason: stopReason,
        stop_sequence: null,
        ...(usage ? { usage } : {}),
      }),
    );
    return;
  }
  const ev = (type: string, data: object) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
  const events = [
    ev('message_start', {
      message: {
        id,
        type: 'message',
        role: 'assistant',
        model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        ...(usage ? { usage: { ...usage, output_tokens: 1 } } : {}),
      },
    }),
  ];
  for (const [index, block] of content.entries()) {
    if (block.type === 'text') {
      events.push(ev('content_block_start', { index, content_block: { type: 'text', text: '' } }));
      for (const piece of block.text.match(/.{1,8}/gs) ?? [])
        events.push(ev('content_block_delta', { index, delta: { type: 'text_delta', text: piece } }));
    } else {
      events.push(
        ev('content_block_start', {
          index,
          content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} },
        }),
      );
      for (const piece of JSON.stringify(block.input).match(/.{1,16}/gs) ?? [])
        events.push(ev('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: piece } }));
    }
    events.push(ev('content_block_stop', { index }));
  }
  events.push(
    ev('message_delta', {
      delta: { stop_reason: stopReason, stop_sequence: null },
      ...(usage ? { usage: { output_tokens: usage.output_tokens } } : {}),
    }),
  );
  events.push(ev('message_stop', {}));
  sse(res, events, reply.truncateAfterEvents, reply.eventDelayMs);
}
