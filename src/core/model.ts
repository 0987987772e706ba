/** The model provider interface: one call per attempt; retries are the caller's (src/core/retry.ts). */
import type { JournalEntry, ToolCall, Usage } from './journal.js';

export interface ToolSpec {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

export interface ModelRequest {
  runId: string;
  step: number;
  attempt: number;
  /** The system prompt: the run's agent's instructions(input). Providers hold no prompt text. */
  instructions: string;
  /** The conversation's first user message: the agent's prompt(input). */
  prompt: string;
  /** Present only when the provider says it needs it (see needsTranscript). */
  transcript?: JournalEntry[];
  tools: ToolSpec[];
  maxCompletionTokens: number;
  /** Turns for the scripted provider: the run's own script, else the agent's demoScript (validated by that provider). */
  script?: unknown;
  signal: AbortSignal;
  /**
   * Set when the engine streams answers (MODEL_STREAMING): the provider asks for a streamed
   * response and hands each piece of answer text here as it arrives, in order, before complete()
   * resolves. The callback never throws and never blocks (the engine batches the writes). The
   * returned turn is still the whole answer, with the usage of the stream's final chunk: a stream
   * that ends without it, or is cut short, is a failed attempt like any other.
   */
  onTextDelta?: (text: string) => void;
}

export interface ModelTurn {
  toolCalls: ToolCall[];
  final?: string;
  /** Text the model wrote beside its tool calls (journalled with the decision, sent back on the next call). */
  text?: string;
  /** Undefined means the provider reported no usage: an error for the caller, never zero. */
  usage?: Usage;
}

export interface ModelProvider {
  readonly name: string;
  /** Whether complete() needs the run's transcript (read incrementally, see TranscriptCache). */
  readonly needsTranscript: boolean;
  complete(req: ModelRequest): Promise<ModelTurn>;
}
