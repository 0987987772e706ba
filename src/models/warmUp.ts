/**
 * A worker's first model call, made ready at boot. In a fresh process the first call through the AI SDK spent
 * 50-75 ms before its request left (its code and Node's HTTP client compiled on first use) against 5-10 ms for the
 * next ones, and the budget pre-flight's first token count 5-7 ms (the tokenizer's tables); a fresh process is what
 * takes over a killed worker's step after a rollout or an eviction. At boot the worker therefore makes one call
 * through each provider's own SDK code with a fetch that answers in the vendor's wire format without leaving the
 * process, one request through Node's fetch to a server of its own on loopback, and one token count. No request
 * reaches a vendor and no run is touched; a failure is logged and the boot goes on.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { ModelProvider, ModelRequest } from '../core/model.js';
import { settledWithin } from '../core/timeout.js';
import { countTokens } from '../core/tokens.js';

/** How long the boot waits for the warm-up: past it the worker starts anyway (the calls go on in the background). */
const WARM_UP_TIMEOUT_MS = 2000;

/** An OpenAI Chat Completions answer (OpenAI and OpenAI-compatible servers): a final text with usage. */
export const CHAT_COMPLETION_REPLY = JSON.stringify({
  id: 'chatcmpl-warm-up',
  object: 'chat.completion',
  created: 0,
  model: 'warm-up',
  choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
});

/** An Anthropic Messages answer: a final text with usage. */
export const ANTHROPIC_MESSAGE_REPLY = JSON.stringify({
  id: 'msg_warm_up',
  type: 'message',
  role: 'assistant',
  model: 'warm-up',
  content: [{ type: 'text', text: 'ok' }],
  stop_reason: 'end_turn',
  stop_sequence: null,
  usage: { input_tokens: 1, output_tokens: 1 },
});

/** A fetch that answers every request with `body` (JSON, 200) and sends nothing. */
export function cannedFetch(body: string): typeof fetch {
  return () => Promise.resolve(new Response(body, { status: 200, headers: { 'content-type': 'application/json' } }));
}

/** The request a provider's warm-up call makes: one tool, no transcript, a signal that never aborts. */
export function warmUpRequest(): ModelRequest {
  return {
    runId: 'warm-up',
    step: 1,
    attempt: 1,
    instructions: 'warm-up',
    prompt: 'warm-up',
    transcript: [],
    tools: [{ name: 'warm_up', description: 'warm-up', parameters: { type: 'object', properties: {} } }],
    maxCompletionTokens: 16,
    signal: new AbortController().signal,
  };
}

/** One POST through Node's fetch to a server of this process on loopback, then the server closes. */
export async function warmHttpClient(): Promise<void> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json', connection: 'close' }).end('{}'));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  try {
    const { port } = server.address() as AddressInfo;
    const res = await fetch(`http://127.0.0.1:${port}/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    await res.text();
  } finally {
    server.close();
  }
}

/**
 * Warms the tokenizer, and every provider that can be warmed with Node's HTTP client, waiting at most
 * WARM_UP_TIMEOUT_MS. Returns what was warmed (for the boot's log line).
 */
export async function warmUpModelCalls(providers: Map<string, ModelProvider>, log: Logger): Promise<string[]> {
  const warmable = [...providers.values()].filter((p) => p.warm !== undefined);
  const warmed: string[] = [];
  const one = async (name: string, fn: () => unknown) => {
    try {
      await fn();
      warmed.push(name);
    } catch (err) {
      log.warn({ code: 'warm_up_failed', provider: name, err }, 'model warm-up failed (the first call will be slower)');
    }
  };
  const all = Promise.all([
    one('tokenizer', () => countTokens('warm-up: the pre-flight counts a prompt like this')),
    ...(warmable.length > 0 ? [one('http', warmHttpClient)] : []),
    ...warmable.map((p) => one(p.name, () => p.warm!())),
  ]);
  if (!(await settledWithin(all, WARM_UP_TIMEOUT_MS)))
    log.warn({ code: 'warm_up_slow', timeoutMs: WARM_UP_TIMEOUT_MS }, 'model warm-up still running: starting anyway');
  return warmed;
}
