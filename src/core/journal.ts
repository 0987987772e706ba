/**
 * Journal entries: the durable transcript of a run, appended one by one to a
 * Redis list and never rewritten. Validated when read back (schema version v:1).
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { countTokens } from './tokens.js';
import { TerminalError } from './errors.js';

/**
 * Token usage: non-negative safe integers (zod's int() is safe-integer only). What a provider reports is
 * validated against it before it is charged (src/worker/step/model.ts); anything else is `invalid_usage`.
 */
export const usageSchema = z.object({
  promptTokens: z.number().int().nonnegative(),
  completionTokens: z.number().int().nonnegative(),
});
export type Usage = z.infer<typeof usageSchema>;

export const toolCallSchema = z.object({
  id: z.string(),
  name: z.string(),
  args: z.unknown(),
});
export type ToolCall = z.infer<typeof toolCallSchema>;

const decision = z.object({
  v: z.literal(1),
  kind: z.literal('decision'),
  step: z.number().int().positive(),
  model: z.string(),
  toolCalls: z.array(toolCallSchema),
  final: z.string().optional(),
  /** Assistant text sent beside tool calls (a final answer goes in `final`): kept so the next call sees it. */
  text: z.string().optional(),
  /** Usage summed over every attempt of this step's model call (retries included). */
  usage: usageSchema,
  attempts: z.number().int().positive(),
});

const observation = z.object({
  v: z.literal(1),
  kind: z.literal('observation'),
  step: z.number().int().positive(),
  callId: z.string(),
  tool: z.string(),
  /** ok | format_error | tool_error | rejected | deduplicated */
  status: z.string(),
  output: z.unknown(),
  actionId: z.string().optional(),
});

const status = z.object({
  v: z.literal(1),
  kind: z.literal('status'),
  step: z.number().int().nonnegative(),
  status: z.string(),
  reason: z.string(),
});

/**
 * What a person did to the run (approve, reject, resolve, cancel), by the authenticated
 * operator's name. Not part of the model's conversation: providers and replays skip it.
 */
const operator = z.object({
  v: z.literal(1),
  kind: z.literal('operator'),
  step: z.number().int().nonnegative(),
  action: z.enum(['approve', 'reject', 'resolve', 'cancel', 'retry', 'continue_version']),
  by: z.string(),
  at: z.number().int(),
  actionId: z.string().optional(),
  /** The decision's outcome or finding (a code, never customer text). */
  detail: z.string(),
});

export const journalEntrySchema = z.discriminatedUnion('kind', [decision, observation, status, operator]);
export type JournalEntry = z.infer<typeof journalEntrySchema>;
export type DecisionEntry = z.infer<typeof decision>;
export type ObservationEntry = z.infer<typeof observation>;
export type OperatorEntry = z.infer<typeof operator>;

/** A journal entry read back does not parse: the run cannot be replayed from it. */
export class JournalCorrupt extends TerminalError {
  constructor(message: string, options?: ErrorOptions) {
    super('journal_corrupt', message, {}, options);
  }
}

export function encodeEntry(entry: JournalEntry): string {
  return JSON.stringify(entry);
}

/**
 * A journalled entry's identity: the sha1 of its bytes as the journal holds them (what `redis.sha1hex` computes in
 * the scripts that check a step's writes follow the decision the store holds, includes/journalledDecision.lua).
 */
export function entryDigest(encoded: string): string {
  return createHash('sha1').update(encoded, 'utf8').digest('hex');
}

export function decodeEntry(raw: string, index: number): JournalEntry {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (err) {
    throw new JournalCorrupt(`journal entry ${index} is not JSON`, { cause: err });
  }
  const r = journalEntrySchema.safeParse(parsed);
  if (!r.success) throw new JournalCorrupt(`journal entry ${index} is invalid: ${r.error.issues[0]?.message}`);
  return r.data;
}

/**
 * Prompt tokens of an encoded entry (its JSON, by the tokenizer: src/core/tokens.ts), summed into the run's context by
 * each commit.
 */
export function estimateTokens(encoded: string): number {
  return countTokens(encoded);
}
