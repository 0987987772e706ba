/**
 * The size cap of a tool's output. Every output a tool returns is journalled (a read's in the step's
 * observation, a write's in its ledger entry too) and shown to the model on every later step: an output of
 * tens of megabytes costs Redis memory for the run's whole life, makes the run's view as large, and holds
 * the worker's event loop while it is encoded and written. Past its tool's cap an output is replaced by a
 * small error naming the cap; the output itself is never written. A leaf module: anything may import it.
 */
import type { Tool } from './tool.js';

/** The cap of a tool that names none (`maxOutputBytes`): 256 KiB of JSON. */
export const DEFAULT_TOOL_OUTPUT_MAX_BYTES = 256 * 1024;

/** What the model sees instead of an output past its cap. */
export interface OutputTooLarge {
  error: 'output_too_large';
  /** The cap. */
  limitBytes: number;
  /** How much had been counted when the cap was passed (a lower bound of the output's size). */
  bytesAtLeast: number;
}

/**
 * The UTF-8 size of `value` as JSON when it exceeds `limit`, else undefined. Counting stops once the cap is
 * passed, so a 40 MB output costs a walk of its first `limit` bytes, never an encoding of the whole.
 */
export function jsonBytesOver(value: unknown, limit: number): number | undefined {
  let total = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    total += sizeOf(v, stack, limit - total);
    if (total > limit) return total;
  }
  return undefined;
}

/**
 * What JSON.stringify escapes in a string (a quote, a backslash, a control character) or may (a surrogate: a lone one
 * is written as \uXXXX).
 */
// eslint-disable-next-line no-control-regex -- the control characters are what is looked for
const ESCAPED = /["\\\u0000-\u001f\ud800-\udfff]/;

/** A string's UTF-8 size as JSON: without an escaped copy of it where nothing in it is escaped (most strings). */
function jsonStringBytes(s: string): number {
  return ESCAPED.test(s) ? Buffer.byteLength(JSON.stringify(s)) : Buffer.byteLength(s) + 2;
}

/** The bytes `v` adds itself (its children pushed onto `stack`); a string longer than `room` counts its length. */
function sizeOf(v: unknown, stack: unknown[], room: number): number {
  if (typeof v === 'string') return v.length > room ? v.length : jsonStringBytes(v);
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return String(v).length;
  if (v === null || v === undefined || typeof v !== 'object') return 4;
  if (Array.isArray(v)) {
    for (const x of v) stack.push(x);
    return 2 + v.length;
  }
  let bytes = 2;
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
    // The key (quoted), its colon and a comma; a key longer than the room counts its length.
    bytes += (k.length > room ? k.length : jsonStringBytes(k)) + 2;
    stack.push(x);
  }
  return bytes;
}

/** The tool's cap: its own `maxOutputBytes`, else the default. */
export function outputCapOf(tool: Pick<Tool, 'maxOutputBytes'>): number {
  return tool.maxOutputBytes ?? DEFAULT_TOOL_OUTPUT_MAX_BYTES;
}

/** `output` when it fits the tool's cap, else the error the model sees in its place. */
export function cappedOutput(
  tool: Pick<Tool, 'maxOutputBytes'>,
  output: unknown,
): { ok: true; output: unknown } | { ok: false; output: OutputTooLarge } {
  const limitBytes = outputCapOf(tool);
  const over = jsonBytesOver(output, limitBytes);
  return over === undefined
    ? { ok: true, output }
    : { ok: false, output: { error: 'output_too_large', limitBytes, bytesAtLeast: over } };
}

/**
 * A confirmed write's output as the ledger records it and the model sees it: past the tool's cap, the receipt and
 * the cap's error instead (the action stays confirmed: the effect happened, only its output is not kept).
 */
export function confirmedOutput(tool: Pick<Tool, 'maxOutputBytes'>, receipt: string, output: unknown): unknown {
  const capped = cappedOutput(tool, output);
  return capped.ok ? output : { receipt, ...capped.output };
}
