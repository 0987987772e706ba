/** The model provider interface: one call per attempt; retries are the caller's (src/core/withRetry.ts). */
import { z } from 'zod';
import type { JournalEntry, ToolCall, TokenUsage } from './journal.js';

/**
 * A provider's name as runs, agents and configuration spell it (the worker's provider map decides whether it exists).
 */
export const providerNameSchema = z
  .string()
  .regex(/^[a-z][a-z0-9_-]{0,62}$/, 'a provider name: lowercase letters, digits, _ or -');

/**
 * A model id as the provider spells it (`gpt-4o-mini`, `claude-sonnet-4-5`, `llama3.1:8b`, `org/model`): printable, no
 * spaces.
 */
export const modelIdSchema = z
  .string()
  .regex(/^[\x21-\x7e]{1,200}$/, 'a model id: 1-200 printable characters, no spaces');

/**
 * Sampling options of a model choice, passed to the provider as they are
 * (unknown keys refused: a typo must not pass silently). maxOutputTokens can
 * only lower the deployment's COMPLETION_TOKEN_CAP, never raise it (the
 * budget pre-flight counts the cap).
 */
export const modelOptionsSchema = z
  .object({
    temperature: z.number().min(0).max(2),
    topP: z.number().gt(0).max(1),
    topK: z.number().int().positive().max(1000),
    maxOutputTokens: z.number().int().positive().max(1_000_000),
    presencePenalty: z.number().min(-2).max(2),
    frequencyPenalty: z.number().min(-2).max(2),
    seed: z
      .number()
      .int()
      .min(0)
      .max(2 ** 31 - 1),
    stopSequences: z.array(z.string().min(1).max(100)).max(4),
  })
  .partial()
  .strict();
export type ModelOptions = z.infer<typeof modelOptionsSchema>;

/**
 * Which model a run uses: the provider's name, the provider's model id and
 * sampling options. Chosen per agent (defineAgent), overridable per tenant
 * (TENANT_MODELS), resolved at intake and pinned in the run spec: a run's
 * model never changes mid-run.
 */
export const modelChoiceSchema = z
  .object({
    provider: providerNameSchema,
    model: modelIdSchema,
    options: modelOptionsSchema.optional(),
  })
  .strict();
export type ModelChoice = z.infer<typeof modelChoiceSchema>;

/** A choice as an agent or a tenant override names it: `model` left out is the provider's deployment default. */
export const agentModelChoiceSchema = z
  .object({
    provider: providerNameSchema,
    model: modelIdSchema.optional(),
    options: modelOptionsSchema.optional(),
  })
  .strict();
export type AgentModelChoice = z.infer<typeof agentModelChoiceSchema>;

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
  /** Present only when the provider says it needs it (see needsTranscript and needsTranscriptFor). */
  transcript?: JournalEntry[];
  tools: ToolSpec[];
  /**
   * The model id pinned in the run spec; undefined: the provider's defaultModel (runs pinned before model ids were).
   */
  model?: string | undefined;
  /** The pinned choice's sampling options (maxOutputTokens is already folded into maxCompletionTokens). */
  options?: ModelOptions | undefined;
  maxCompletionTokens: number;
  /**
   * Turns for the scripted provider: the run's own script, else the agent's demoScript (validated by that provider).
   */
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

/**
 * How far a failed attempt got, as its provider can tell, for an error that reports no usage (`details.reach` of the
 * error it throws; its `details.usage`, when it has one, wins): `none`, the request never reached the model (refused
 * or reset before it was sent, DNS, a 429 or another refusal before any work); `prompt`, the model received it and
 * answered no text (a 5xx); `answer`, the model may have generated (a stream cut after its 200, a timeout or a dropped
 * connection after the request left, an answer the engine could not read). An error that says nothing is taken as
 * `answer`. The engine charges the attempt by it (attemptCharge, src/budget/policy.ts).
 */
export type AttemptReach = 'none' | 'prompt' | 'answer';

/** An error's `details.reach`, when it names one. */
export function reachOf(details: Record<string, unknown> | undefined): AttemptReach | undefined {
  const r = details?.reach;
  return r === 'none' || r === 'prompt' || r === 'answer' ? r : undefined;
}

export interface ModelTurn {
  toolCalls: ToolCall[];
  final?: string;
  /** Text the model wrote beside its tool calls (journalled with the decision, sent back on the next call). */
  text?: string;
  /** Undefined means the provider reported no usage: an error for the caller, never zero. */
  usage?: TokenUsage;
}

export interface ModelProvider {
  readonly name: string;
  /** The model id a run gets when its choice names this provider but no model (the deployment's default for it). */
  readonly defaultModel?: string | undefined;
  /** Whether complete() needs the run's transcript (read incrementally, see TranscriptCache). */
  readonly needsTranscript: boolean;
  /**
   * Whether this one call needs the transcript when needsTranscript is false (the scripted provider's branching
   * turn): asked before each model call with the call's script and step; absent, needsTranscript decides alone.
   */
  needsTranscriptFor?(req: Pick<ModelRequest, 'script' | 'step'>): boolean;
  complete(req: ModelRequest): Promise<ModelTurn>;
  /**
   * Makes the provider's code ready before its first call, sending nothing (a worker calls it once at boot,
   * src/models/warmUp.ts); a provider without it is not warmed.
   */
  warm?(): Promise<void>;
}
