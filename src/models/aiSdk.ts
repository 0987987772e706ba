/**
 * Model providers on the Vercel AI SDK (`ai` generateText): OpenAI Chat
 * Completions, Anthropic Messages, and any OpenAI-compatible server (vLLM,
 * Ollama). One attempt per complete(): the SDK's retries are off (the engine
 * retries, and waits out Retry-After by delaying the step job); the call is
 * bounded by the engine's timeout and the step's signal. Tools are offered
 * without `execute`: the engine runs them through the ledger.
 *
 * Failures say what a retry should do: 429, 5xx, 408, a network failure or a
 * timeout is a RetryableError carrying `Retry-After` (seconds or HTTP date, in
 * ms, uncapped: the engine bounds it by the run's deadline and its outage
 * window); any other answer is a TerminalError (`model_failed`). A response
 * without usage comes back without `usage`: the step processor calls that an
 * error (`missing_usage`), never zero. Each failure says how far the attempt got
 * (`details.reach`, src/core/model.ts), which the engine charges it by: `none` for
 * a connection refused before the request left (or DNS), a 429, a 408 or another
 * 4xx refusal; `prompt` for a 5xx; `answer` for a stream cut after its 200, a
 * timeout, a connection dropped after the request left, an unreadable 2xx.
 *
 * Streaming (the request carries `onTextDelta`): the SDK's streamText, each
 * text delta handed on as it arrives; the usage is the stream's final chunk's.
 * A stream that is cut short (no finish part, or the connection dropped) is a
 * RetryableError: nothing usable was received and the step asks again.
 *
 * warm() runs the same code once at boot through a copy of the vendor's SDK model whose fetch answers inside the
 * process (src/models/warmUp.ts): a fresh worker's first real call is then as quick as its later ones.
 */
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import {
  APICallError,
  generateText,
  jsonSchema,
  RetryError,
  streamText,
  type CallSettings,
  type LanguageModel,
  type LanguageModelMiddleware,
  type LanguageModelUsage,
  type ModelMessage,
  type ToolSet,
  wrapLanguageModel,
} from 'ai';
import { distinctCallIds } from '../core/callIds.js';
import { AgentError, RetryableError, TerminalError } from '../core/errors.js';
import type { JournalEntry, ToolCall, TokenUsage } from '../core/journal.js';
import type { ModelOptions, ModelProvider, ModelRequest, ModelTurn, ToolSpec } from '../core/model.js';
import { parseRetryAfter } from '../core/retryAfter.js';
import { TimeoutError, withTimeout } from '../core/timeout.js';
import { ANTHROPIC_MESSAGE_REPLY, CHAT_COMPLETION_REPLY, cannedFetch, warmUpRequest } from './warmUp.js';

export interface AiSdkOptions {
  /** The provider's name in runs (`agent.model`) and metrics. */
  name: string;
  /** The model of requests that name none (runs pinned before model ids were). */
  model: LanguageModel;
  /** Its id: what a model choice naming only this provider is pinned to. */
  defaultModel?: string;
  /** The SDK model for a pinned model id (built once per id); without it every request goes to `model`. */
  modelFor?: (modelId: string) => LanguageModel;
  timeoutMs: number;
  /** Provider-specific request options (e.g. OpenAI's max_completion_tokens). */
  providerOptions?: (req: ModelRequest) => Record<string, Record<string, number | string | boolean>>;
  /** Whether the completion cap goes as the SDK's maxOutputTokens (off when providerOptions carries it). */
  sendMaxOutputTokens?: boolean;
  /**
   * The same vendor's SDK model with a fetch that answers in its wire format without sending anything (warmUp.ts):
   * warm() makes one call through it at boot.
   */
  warmModel?: LanguageModel;
  now?: () => number;
}

export class AiSdkProvider implements ModelProvider {
  readonly name: string;
  readonly defaultModel: string | undefined;
  readonly needsTranscript = true;
  /** SDK models by pinned model id (a handful per deployment: one per agent and tenant choice). */
  private readonly models = new Map<string, LanguageModel>();
  private readonly now: () => number;
  /** Tool sets by the registry's spec list (built once per list, not per call). */
  private readonly toolSets = new WeakMap<ToolSpec[], ToolSet>();

  private readonly model: LanguageModel;

  constructor(private readonly opts: AiSdkOptions) {
    this.model = withDistinctCallIds(opts.model);
    this.name = opts.name;
    this.defaultModel = opts.defaultModel;
    this.now = opts.now ?? Date.now;
  }

  /** The SDK model of the run's pinned model id (the default one when the run pinned none). */
  languageModel(modelId: string | undefined): LanguageModel {
    if (modelId === undefined || modelId === this.defaultModel || !this.opts.modelFor) return this.model;
    let m = this.models.get(modelId);
    if (!m) this.models.set(modelId, (m = withDistinctCallIds(this.opts.modelFor(modelId))));
    return m;
  }

  async complete(req: ModelRequest): Promise<ModelTurn> {
    return this.answer(req, this.languageModel(req.model));
  }

  /** One call through the warm-up model (nothing leaves the process): this provider's code ready for its first step. */
  async warm(): Promise<void> {
    if (this.opts.warmModel) await this.answer(warmUpRequest(), withDistinctCallIds(this.opts.warmModel));
  }

  private async answer(req: ModelRequest, model: LanguageModel): Promise<ModelTurn> {
    let result: Answer;
    try {
      result = await withTimeout(this.opts.timeoutMs, req.signal, (signal) =>
        req.onTextDelta ? this.stream(req, model, signal, req.onTextDelta) : this.generate(req, model, signal),
      );
    } catch (err) {
      if (req.signal.aborted) throw err;
      throw classify(err, this.now());
    }
    const toolCalls: ToolCall[] = result.toolCalls.map((c) => ({ id: c.toolCallId, name: c.toolName, args: c.input }));
    const text = result.text.length > 0 ? result.text : undefined;
    const usage = usageOf(result.usage);
    return {
      toolCalls,
      // No tool call: the text is the answer (empty when the model said nothing). With tool calls it is kept beside
      // them.
      ...(toolCalls.length === 0 ? { final: text ?? '' } : text !== undefined ? { text } : {}),
      ...(usage ? { usage } : {}),
    };
  }

  private callOptions(req: ModelRequest, model: LanguageModel, signal: AbortSignal) {
    return {
      model,
      ...samplingOf(req.options),
      // The agent's instructions and first message come with the request: the provider holds no prompt text.
      system: req.instructions,
      messages: [{ role: 'user' as const, content: req.prompt }, ...toMessages(req.transcript ?? [])],
      tools: this.toolSet(req.tools),
      toolChoice: 'auto' as const,
      // The engine retries (src/worker/step/model.ts): one HTTP request per attempt.
      maxRetries: 0,
      abortSignal: signal,
      ...(this.opts.sendMaxOutputTokens === false ? {} : { maxOutputTokens: req.maxCompletionTokens }),
      ...(this.opts.providerOptions ? { providerOptions: this.opts.providerOptions(req) } : {}),
    };
  }

  private async generate(req: ModelRequest, model: LanguageModel, signal: AbortSignal): Promise<Answer> {
    const r = await generateText(this.callOptions(req, model, signal));
    return { text: r.text, toolCalls: r.toolCalls, usage: r.usage };
  }

  /**
   * One streamed attempt, read to its end: text deltas go to `onDelta` as they arrive; the usage
   * is the finish part's (the stream's final usage chunk). An error part is thrown as the call's
   * error; a stream that ends without its finish part was cut short (RetryableError).
   */
  private async stream(
    req: ModelRequest,
    model: LanguageModel,
    signal: AbortSignal,
    onDelta: (text: string) => void,
  ): Promise<Answer> {
    const r = streamText({ ...this.callOptions(req, model, signal), onError: () => {} });
    let text = '';
    const toolCalls: Answer['toolCalls'] = [];
    let usage: LanguageModelUsage | undefined;
    let finished = false;
    try {
      for await (const part of r.fullStream) {
        if (part.type === 'text-delta') {
          text += part.text;
          onDelta(part.text);
        } else if (part.type === 'tool-call') {
          toolCalls.push({ toolCallId: part.toolCallId, toolName: part.toolName, input: part.input });
        } else if (part.type === 'error') {
          throw part.error;
        } else if (part.type === 'abort') {
          throw signal.reason ?? new Error('model stream aborted');
        } else if (part.type === 'finish') {
          finished = true;
          usage = part.totalUsage;
        }
      }
    } catch (err) {
      // The connection dropped after a 2xx began (the SDK marks it retryable): the answer was cut short.
      if (APICallError.isInstance(err) && (err.statusCode ?? 0) < 300 && err.isRetryable) {
        throw Object.assign(new RetryableError('model stream cut short (truncated)', undefined, { reach: 'answer' }), {
          cause: err,
        });
      }
      throw err;
    }
    if (!finished)
      throw new RetryableError('model stream ended before its finish (truncated)', undefined, { reach: 'answer' });
    return { text, toolCalls, usage };
  }

  private toolSet(specs: ToolSpec[]): ToolSet {
    let set = this.toolSets.get(specs);
    if (!set) {
      set = {};
      // Some compatible servers reject a `$schema` key inside a tool's parameters.
      for (const s of specs) {
        const { $schema: _drop, ...parameters } = s.parameters;
        set[s.name] = { description: s.description, inputSchema: jsonSchema(parameters) };
      }
      this.toolSets.set(specs, set);
    }
    return set;
  }
}

/** What one attempt produced, from generateText or a streamed response read to its end. */
interface Answer {
  text: string;
  toolCalls: { toolCallId: string; toolName: string; input: unknown }[];
  usage: LanguageModelUsage | undefined;
}

/** The pinned choice's sampling options as the SDK's call settings (maxOutputTokens travels as the request's cap). */
export function samplingOf(
  options: ModelOptions | undefined,
): Partial<
  Pick<
    CallSettings,
    'temperature' | 'topP' | 'topK' | 'presencePenalty' | 'frequencyPenalty' | 'seed' | 'stopSequences'
  >
> {
  if (!options) return {};
  const { maxOutputTokens: _cap, ...sampling } = options;
  return sampling;
}

/**
 * The journalled transcript as the SDK's messages: each decision (text and tool calls), then its tool
 * results in the order the model asked for them (calls that ran at once are journalled as they finished).
 */
export function toMessages(transcript: JournalEntry[]): ModelMessage[] {
  const messages: ModelMessage[] = [];
  let pending: { id: string; name: string }[] = [];
  let results = new Map<string, ModelMessage & { role: 'tool' }>();
  const closeTurn = () => {
    // A call with no observation (dropped at the deadline, parked): the SDK needs a result for every call.
    for (const c of pending) messages.push(results.get(c.id) ?? toolResult(c.id, c.name, { status: 'not_run' }));
    // An observation of no call of this turn (never written by the engine) is kept, after the turn's results.
    for (const [id, msg] of results) if (!pending.some((c) => c.id === id)) messages.push(msg);
    pending = [];
    results = new Map();
  };
  for (const e of transcript) {
    if (e.kind === 'decision') {
      closeTurn();
      const text = e.final ?? e.text;
      messages.push({
        role: 'assistant',
        content: [
          ...(text ? [{ type: 'text' as const, text }] : []),
          ...e.toolCalls.map((c) => ({
            type: 'tool-call' as const,
            toolCallId: c.id,
            toolName: c.name,
            input: c.args ?? {},
          })),
        ],
      });
      pending = e.toolCalls.map((c) => ({ id: c.id, name: c.name }));
    } else if (e.kind === 'observation') {
      results.set(e.callId, toolResult(e.callId, e.tool, { status: e.status, output: e.output ?? null }));
    }
  }
  closeTurn();
  return messages;
}

function toolResult(toolCallId: string, toolName: string, value: unknown): ModelMessage & { role: 'tool' } {
  return {
    role: 'tool',
    content: [{ type: 'tool-result', toolCallId, toolName, output: { type: 'json', value: value as never } }],
  };
}

/** A failed attempt as the engine's error: retryable (with the server's Retry-After) or terminal. */
export function classify(err: unknown, nowMs: number): AgentError {
  if (err instanceof AgentError && !(err instanceof TimeoutError)) return err;
  // The request may have left and the model be generating: charged as an answer.
  if (err instanceof TimeoutError)
    return new RetryableError(`model request ${err.message}`, undefined, { timeoutMs: err.timeoutMs, reach: 'answer' });
  // With maxRetries 0 the SDK throws the call's own error; a RetryError wraps it otherwise.
  const cause = RetryError.isInstance(err) ? err.lastError : err;
  if (APICallError.isInstance(cause)) {
    const status = cause.statusCode;
    const retryAfterMs = parseRetryAfter(header(cause.responseHeaders, 'retry-after'), nowMs);
    // No status: the request never got an answer (refused, reset, DNS): safe to ask again. Refused before it left:
    // nothing reached the model; dropped after: it may have generated. A 429 or 408 did no work, a 5xx read it.
    if (status === undefined || status === 429 || status === 408 || status >= 500) {
      const reach = status === undefined ? networkReach(cause) : status >= 500 ? 'prompt' : 'none';
      const e = new RetryableError(`model answered ${status ?? 'nothing'}`, retryAfterMs, { status, reach });
      return Object.assign(e, { cause });
    }
    // A 2xx here is an answer that does not match the API's schema; one without usage is named so (never read as zero).
    if (status < 300 && lacksUsage(cause.responseBody))
      return Object.assign(
        new TerminalError('missing_usage', 'the provider reported no token usage', { status, reach: 'answer' }),
        { cause },
      );
    const what = status < 300 ? `model response did not match the API (${status})` : `model answered ${status}`;
    // Another 4xx refused the request before any work.
    const reach = status < 300 ? 'answer' : 'none';
    return Object.assign(new TerminalError('model_failed', what, { status, reach }), { cause });
  }
  // fetch's own network failure (not wrapped by the SDK).
  if (cause instanceof TypeError && /fetch failed/i.test(cause.message))
    return Object.assign(
      new RetryableError('model request failed: network', undefined, { reach: networkReach(cause) }),
      {
        cause,
      },
    );
  const name = (cause as Error | undefined)?.name ?? 'error';
  return Object.assign(new TerminalError('model_failed', `model response unusable: ${name}`, { reach: 'answer' }), {
    cause,
  });
}

/** Failures of the connection itself (undici's and the OS's codes): the request never left the process. */
const CONNECT_FAILURES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/**
 * How far a request that got no answer went: `none` when its connection was never made (a code of CONNECT_FAILURES in
 * the error's causes), else `answer` (the connection dropped after the request may have left: the model may have
 * generated).
 */
export function networkReach(err: unknown): 'none' | 'answer' {
  let e: unknown = err;
  for (let i = 0; i < 5 && e !== null && typeof e === 'object'; i++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && CONNECT_FAILURES.has(code)) return 'none';
    e = (e as { cause?: unknown }).cause;
  }
  return 'answer';
}

function lacksUsage(body: string | undefined): boolean {
  try {
    const parsed = JSON.parse(body ?? '') as unknown;
    return typeof parsed === 'object' && parsed !== null && !('usage' in parsed);
  } catch {
    return false;
  }
}

function header(headers: Record<string, string> | undefined, name: string): string | undefined {
  if (!headers) return undefined;
  for (const [k, v] of Object.entries(headers)) if (k.toLowerCase() === name) return v;
  return undefined;
}

export interface ProviderSettings {
  baseUrl?: string;
  apiKey?: string;
  /** The default model id (a choice that names none); runs name their own through the spec. */
  model: string;
  timeoutMs: number;
}

/**
 * A model whose answers' tool calls each have an id of their own (src/core/callIds.ts), made so before the SDK reads
 * them: generateText pairs each tool call of an answer with its parsed input by id, so a server that repeats an id
 * has every call of that id come back with the first one's arguments, the others lost. A streamed answer's calls
 * reach the engine apart (the SDK reads them by their place in the stream) and the step makes their ids distinct.
 */
function withDistinctCallIds(model: LanguageModel): LanguageModel {
  // A model id (the SDK's global provider) or a model of the older specification is left as it is: the step still
  // makes the ids it is handed distinct.
  return typeof model === 'string' || model.specificationVersion !== 'v3'
    ? model
    : wrapLanguageModel({ model, middleware: DISTINCT_CALL_IDS });
}

const DISTINCT_CALL_IDS: LanguageModelMiddleware = {
  specificationVersion: 'v3',
  wrapGenerate: async ({ doGenerate }) => {
    const answer = await doGenerate();
    const content = distinctCallIds(
      answer.content,
      (part) => (part.type === 'tool-call' ? part.toolCallId : undefined),
      (part, toolCallId) => ({ ...part, toolCallId }),
    );
    return content === answer.content ? answer : { ...answer, content };
  },
};

/** OpenAI Chat Completions (not the Responses API): the completion cap goes as max_completion_tokens. */
export function openAIOptions(s: ProviderSettings): AiSdkOptions {
  const openai = createOpenAI({ ...(s.baseUrl ? { baseURL: s.baseUrl } : {}), apiKey: s.apiKey ?? '' });
  const warm = createOpenAI({ apiKey: 'warm-up', fetch: cannedFetch(CHAT_COMPLETION_REPLY) });
  return {
    name: 'openai',
    model: openai.chat(s.model),
    warmModel: warm.chat(s.model),
    defaultModel: s.model,
    modelFor: (id) => openai.chat(id),
    timeoutMs: s.timeoutMs,
    sendMaxOutputTokens: false,
    providerOptions: (req) => ({ openai: { maxCompletionTokens: req.maxCompletionTokens } }),
  };
}

/** Anthropic Messages (max_tokens is required there: the completion cap). */
export function anthropicProvider(s: ProviderSettings): AiSdkProvider {
  const anthropic = createAnthropic({ ...(s.baseUrl ? { baseURL: s.baseUrl } : {}), apiKey: s.apiKey ?? '' });
  const warm = createAnthropic({ apiKey: 'warm-up', fetch: cannedFetch(ANTHROPIC_MESSAGE_REPLY) });
  return new AiSdkProvider({
    name: 'anthropic',
    model: anthropic(s.model),
    warmModel: warm(s.model),
    defaultModel: s.model,
    modelFor: (id) => anthropic(id),
    timeoutMs: s.timeoutMs,
  });
}

/**
 * An OpenAI-compatible server (vLLM, Ollama, LM Studio...): Chat Completions at baseUrl, the usage chunk asked for when
 * streaming.
 */
export function openAICompatibleProvider(s: ProviderSettings & { baseUrl: string }): AiSdkProvider {
  const compat = createOpenAICompatible({
    name: 'openai-compatible',
    baseURL: s.baseUrl,
    includeUsage: true,
    ...(s.apiKey ? { apiKey: s.apiKey } : {}),
  });
  const warm = createOpenAICompatible({
    name: 'openai-compatible',
    baseURL: s.baseUrl,
    includeUsage: true,
    fetch: cannedFetch(CHAT_COMPLETION_REPLY),
  });
  return new AiSdkProvider({
    name: 'openai-compatible',
    model: compat.chatModel(s.model),
    warmModel: warm.chatModel(s.model),
    defaultModel: s.model,
    modelFor: (id) => compat.chatModel(id),
    timeoutMs: s.timeoutMs,
  });
}

/**
 * The SDK's usage as the engine's: both counts or none (a half-reported usage is a missing one, never read as zero);
 * the input total includes cache reads and writes (AI SDK v6), which are kept apart where the provider reports them.
 */
export function usageOf(u: LanguageModelUsage | undefined): TokenUsage | undefined {
  const { inputTokens, outputTokens } = u ?? {};
  if (typeof inputTokens !== 'number' || typeof outputTokens !== 'number') return undefined;
  const read = u?.inputTokenDetails?.cacheReadTokens;
  const written = u?.inputTokenDetails?.cacheWriteTokens;
  return {
    promptTokens: inputTokens,
    completionTokens: outputTokens,
    ...(typeof read === 'number' && read > 0 ? { cachedInputTokens: read } : {}),
    ...(typeof written === 'number' && written > 0 ? { cacheWriteTokens: written } : {}),
  };
}
