/**
 * Journal entries: the durable transcript of a run, appended one by one to a
 * Redis list and never rewritten. Validated when read back (schema version v:1).
 * An entry is stored as its JSON, or, above JOURNAL_COMPRESS_MIN_BYTES, compressed behind a marker byte
 * (packEntry); every reader goes through decodeEntry, which reads both.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { countTokens } from './tokens.js';
import { TerminalError } from './errors.js';
import { behindMarker, dictionaryCodec } from './dictionaryCodec.js';
import { fromLines, toLines } from './lineList.js';

/**
 * Token usage: non-negative safe integers (zod's int() is safe-integer only). What a provider reports is
 * validated against it before it is charged (src/worker/step/model.ts); anything else is `invalid_usage`.
 */
export const tokenUsageSchema = z.object({
  /** Every input token, cached reads and cache writes included. */
  promptTokens: z.number().int().nonnegative(),
  completionTokens: z.number().int().nonnegative(),
  /** Of promptTokens, those read from the provider's prompt cache (billed at its cached-input price), where reported. */
  cachedInputTokens: z.number().int().nonnegative().optional(),
  /** Of promptTokens, those written to the provider's prompt cache (billed at its cache-write price), where reported. */
  cacheWriteTokens: z.number().int().nonnegative().optional(),
});
export type TokenUsage = z.infer<typeof tokenUsageSchema>;

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
  usage: tokenUsageSchema,
  attempts: z.number().int().positive(),
  /**
   * What those attempts cost in µ$ (src/core/prices.ts), and the price versions they were charged at (one per
   * price in effect during the step): recorded with the charge, so a later price change never rewrites it.
   */
  cost: z.object({ micros: z.number().int().nonnegative(), prices: z.array(z.string()) }).optional(),
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

/** An entry's JSON (what budgets count and prompts carry, whatever form the journal stores it in). */
export function encodeEntry(entry: JournalEntry): string {
  return JSON.stringify(entry);
}

/** An entry as the journal stores it: its JSON, or the compressed form (a Buffer starting with the marker byte). */
export type StoredEntry = string | Buffer;

/**
 * The stored form's first byte when the rest is the entry's JSON compressed by JOURNAL_CODEC.
 * A JSON entry starts with `{`: an entry written before compression existed reads as it always did, and a new codec
 * or dictionary takes another marker value, never this one.
 */
export const DEFLATE_MARKER = 0x01;

/**
 * Entries of fewer JSON bytes are stored as JSON. Chosen by measurement (bench section `bytes`,
 * docs/benchmarks.md): a node:zlib call costs a fixed ~9 µs to compress and ~5 µs to inflate whatever its size,
 * about a fifth of a read-only step's worker CPU each, while an entry under 512 bytes saves at most a few hundred
 * bytes. The steps of a small transcript (a decision naming a tool, a short observation) so cost what they did;
 * from 512 bytes up the entry shrinks to about half.
 */
export const JOURNAL_COMPRESS_MIN_BYTES = 512;

/**
 * The journal's codec: raw deflate with a preset dictionary (src/core/dictionaryCodec.ts), the journal's own field
 * names and the openings of each entry kind (nothing an agent names), so even a short entry finds its skeleton in the
 * window. Changing the dictionary changes what DEFLATE_MARKER entries mean: a new dictionary is a new marker, never
 * an edit of this one. Chosen by measurement on the built-in support agent's transcripts and on 20-step transcripts
 * of 1 KB prose observations (bench section `bytes` prints the table): deflate with the dictionary kept 0.42 and 0.46
 * of the bytes, against 0.66 / 0.57 without it, brotli (quality 6) 0.63 / 0.54, zstd (level 3, node:zlib) 0.71 /
 * 0.60 and 0.48 / 0.50 with the same dictionary; only brotli at quality 11 came close (0.57 / 0.46) at 50 to 100
 * times the CPU.
 */
const JOURNAL_DICTIONARY =
  '{"v":1,"kind":"operator","step":1,"action":"approve","by":"","at":1,"detail":""}' +
  '{"v":1,"kind":"status","step":1,"status":"completed","reason":"final_answer"}' +
  '"usage":{"promptTokens":100,"completionTokens":10},"attempts":1}' +
  '{"v":1,"kind":"decision","step":1,"model":"","toolCalls":[{"id":"call_1_0","name":"","args":{}}],"final":"","text":"' +
  '{"v":1,"kind":"observation","step":1,"callId":"call_1_0","tool":"","status":"ok","output":{"';
const JOURNAL_CODEC = dictionaryCodec(JOURNAL_DICTIONARY);

/** The stored form of an entry's JSON: compressed when it is long enough and compression makes it shorter. */
export function packEntry(json: string): StoredEntry {
  if (json.length < JOURNAL_COMPRESS_MIN_BYTES && Buffer.byteLength(json) < JOURNAL_COMPRESS_MIN_BYTES) return json;
  const plain = Buffer.from(json, 'utf8');
  const packed = JOURNAL_CODEC.deflate(plain);
  if (packed.length + 1 >= plain.length) return json;
  return behindMarker(DEFLATE_MARKER, packed);
}

/** An entry's JSON from its stored form (either form, as a string or as the bytes Redis returned). */
export function unpackEntry(stored: StoredEntry, index: number): string {
  if (typeof stored === 'string') return stored;
  if (stored.length === 0 || stored[0] !== DEFLATE_MARKER) return stored.toString('utf8');
  try {
    return JOURNAL_CODEC.inflate(stored.subarray(1)).toString('utf8');
  } catch (err) {
    throw new JournalCorrupt(`journal entry ${index} does not inflate`, { cause: err });
  }
}

/**
 * A journalled entry's identity: the sha1 of its bytes as the journal holds them (what `redis.sha1hex` computes in
 * the scripts that check a step's writes follow the decision the store holds, includes/journalledDecision.lua):
 * of the compressed form for a compressed entry.
 */
export function entryDigest(stored: StoredEntry): string {
  return typeof stored === 'string'
    ? createHash('sha1').update(stored, 'utf8').digest('hex')
    : createHash('sha1').update(stored).digest('hex');
}

/** An entry read back from the journal (JSON or compressed; Redis's bytes or a string), validated. */
export function decodeEntry(raw: StoredEntry, index: number): JournalEntry {
  let parsed: unknown;
  try {
    parsed = JSON.parse(unpackEntry(raw, index));
  } catch (err) {
    if (err instanceof JournalCorrupt) throw err;
    throw new JournalCorrupt(`journal entry ${index} is not JSON`, { cause: err });
  }
  const r = journalEntrySchema.safeParse(parsed);
  if (!r.success) throw new JournalCorrupt(`journal entry ${index} is invalid: ${r.error.issues[0]?.message}`);
  return r.data;
}

/**
 * The entries of a journal as read, each validated; one that does not decode is left out and its index handed to
 * `unreadable` (a reader that shows what it can: the run view, an erasure naming the keys a run's waits used).
 */
export function decodeReadable(raws: readonly StoredEntry[], unreadable?: (index: number) => void): JournalEntry[] {
  const out: JournalEntry[] = [];
  raws.forEach((raw, i) => {
    try {
      out.push(decodeEntry(raw, i));
    } catch {
      unreadable?.(i);
    }
  });
  return out;
}

/**
 * Prompt tokens of an encoded entry (its JSON, by the tokenizer: src/core/tokens.ts), summed into the run's context by
 * each commit.
 */
export function estimateTokens(encoded: string): number {
  return countTokens(encoded);
}

/**
 * The first byte of an ended run's packed journal (RunKeys.journalPacked): the rest is its entries' JSON one a line
 * (src/core/lineList.ts), compressed by PACKED_JOURNAL_CODEC as one value, so an entry finds the ones before it (a
 * transcript repeats its tool names, its ids and what its tools read). A new codec or dictionary takes another marker
 * value.
 */
export const JOURNAL_PACKED_MARKER = 0x02;
/**
 * The first byte of a journal packed as the JSON array of its entries' JSON, by JOURNAL_CODEC: how journals were
 * packed before lines, and how one is packed whose entries have no line form.
 */
export const JOURNAL_PACKED_JSON_MARKER = 0x01;

/**
 * The journal's dictionary at level 1 (src/core/lineList.ts says why). A single entry is short and its repeats are
 * the dictionary's: it keeps level 6 (JOURNAL_CODEC).
 */
const PACKED_JOURNAL_CODEC = dictionaryCodec(JOURNAL_DICTIONARY, 1);

/** Entries (their JSON, oldest first) as one packed journal. */
export function packJournal(entries: readonly string[]): Buffer {
  const lines = toLines(entries);
  return lines
    ? behindMarker(JOURNAL_PACKED_MARKER, PACKED_JOURNAL_CODEC.deflate(lines))
    : behindMarker(JOURNAL_PACKED_JSON_MARKER, JOURNAL_CODEC.deflate(JSON.stringify(entries)));
}

/** The entries (their JSON, oldest first) of a packed journal (either form); none for an absent one. */
export function unpackJournal(packed: Buffer | null | undefined): string[] {
  if (!packed || packed.length === 0) return [];
  let parsed: unknown;
  try {
    if (packed[0] === JOURNAL_PACKED_MARKER) return fromLines(PACKED_JOURNAL_CODEC.inflate(packed.subarray(1)));
    if (packed[0] !== JOURNAL_PACKED_JSON_MARKER) throw new Error(`unknown marker ${packed[0]}`);
    parsed = JSON.parse(JOURNAL_CODEC.inflate(packed.subarray(1)).toString('utf8'));
  } catch (err) {
    throw new JournalCorrupt('the packed journal does not unpack', { cause: err });
  }
  if (!Array.isArray(parsed) || !parsed.every((e) => typeof e === 'string'))
    throw new JournalCorrupt('the packed journal is not a list of entries');
  return parsed;
}
