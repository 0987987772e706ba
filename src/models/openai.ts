/**
 * OpenAI-compatible chat completions with tool calling, over plain fetch (no
 * client-side hidden retries: src/core/retry.ts decides). 429/5xx/timeouts
 * are RetryableError (a model call has no outside effect); a response without
 * usage is a TerminalError, never zero.
 */
import { AgentError, RetryableError, TerminalError } from '../core/errors.js';
import { TimeoutError, withTimeout } from '../core/timeout.js';
import type { JournalEntry } from '../core/journal.js';
import type { ModelProvider, ModelRequest, ModelTurn } from '../core/model.js';

export interface OpenAIOptions {
  baseUrl: string;
  apiKey?: string;
  model: string;
  timeoutMs: number;
}

type Message = Record<string, unknown>;

interface ChatCompletion {
  choices?: { message?: { content?: string | null; tool_calls?: { id: string; function: { name: string; arguments: string } }[] } }[];
  usage?: { prompt_tokens?: number; completion_tokens?: number };
}

/** The chat: the agent's instructions and prompt (given in the request), then the transcript. */
export function toMessages(req: ModelRequest): Message[] {
  const messages: Message[] = [{ role: 'system', content: req.instructions }, { role: 'user', content: req.prompt }];
  for (const e of req.transcript ?? ([] as JournalEntry[])) {
    if (e.kind === 'decision') {
      messages.push({
        role: 'assistant',
        content: e.final ?? null,
        ...(e.toolCalls.length > 0
          ? { tool_calls: e.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: JSON.stringify(c.args ?? {}) } })) }
          : {}),
      });
    } else if (e.kind === 'observation') {
      messages.push({ role: 'tool', tool_call_id: e.callId, content: JSON.stringify({ status: e.status, output: e.output }) });
    }
  }
  return messages;
}

export class OpenAIProvider implements ModelProvider {
  readonly name = 'openai';
  readonly needsTranscript = true;

  constructor(private readonly opts: OpenAIOptions) {}

  async complete(req: ModelRequest): Promise<ModelTurn> {
    let body: ChatCompletion;
    try {
      body = await withTimeout(this.opts.timeoutMs, req.signal, (signal) => this.post(req, signal));
    } catch (err) {
      if (req.signal.aborted) throw err;
      if (err instanceof TimeoutError) throw new RetryableError(`model request ${err.message}`, undefined, { timeoutMs: err.timeoutMs });
      if (err instanceof AgentError) throw err;
      throw new RetryableError(`model request failed: ${(err as Error).message}`);
    }
    const msg = body.choices?.[0]?.message;
    if (!msg) throw new TerminalError('model_failed', 'model response has no message');
    const usage =
      typeof body.usage?.prompt_tokens === 'number' && typeof body.usage?.completion_tokens === 'number'
        ? { promptTokens: body.usage.prompt_tokens, completionTokens: body.usage.completion_tokens }
        : undefined;
    const toolCalls = (msg.tool_calls ?? []).map((c) => {
      let args: unknown;
      try {
        args = JSON.parse(c.function.arguments || '{}');
      } catch {
        args = { __unparseable: c.function.arguments };
      }
      return { id: c.id, name: c.function.name, args };
    });
    return { toolCalls, ...(toolCalls.length === 0 && msg.content ? { final: msg.content } : {}), ...(usage ? { usage } : {}) };
  }

  /** The request and its body, under the caller's signal (timeout and parent). */
  private async post(req: ModelRequest, signal: AbortSignal): Promise<ChatCompletion> {
    const res = await fetch(`${this.opts.baseUrl.replace(/\/$/, '')}/chat/completions`, {
      method: 'POST',
      signal,
      headers: {
        'content-type': 'application/json',
        ...(this.opts.apiKey ? { authorization: `Bearer ${this.opts.apiKey}` } : {}),
      },
      body: JSON.stringify({
        model: this.opts.model,
        messages: toMessages(req),
        tools: req.tools.map((t) => ({ type: 'function', function: t })),
        max_tokens: req.maxCompletionTokens,
      }),
    });
    if (res.status === 429 || res.status >= 500) {
      const retryAfter = Number(res.headers.get('retry-after'));
      await res.body?.cancel();
      throw new RetryableError(`model answered ${res.status}`, Number.isFinite(retryAfter) ? retryAfter * 1000 : undefined, { status: res.status });
    }
    if (!res.ok) {
      await res.body?.cancel();
      throw new TerminalError('model_failed', `model answered ${res.status}`, { status: res.status });
    }
    return (await res.json()) as ChatCompletion;
  }
}
