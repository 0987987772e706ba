/**
 * An MCP server's tool schemas are untrusted input: the server chooses them, the worker turns them into zod
 * (at boot) and checks the model's arguments with them (in a step, on the event loop that also renews the
 * step's lock). Unbounded, one schema could hold every worker: a catastrophic regular expression
 * (`^(a+)+$` against 34 a's and a `!` backtracks for hours), or a schema large enough that building it and
 * checking an argument against it take seconds.
 *
 * So a schema is accepted only within bounds (its size, its nesting, its combinators), and every regular
 * expression in it (`pattern`, the keys of `patternProperties`) runs on RE2 (re2js: a pure JavaScript port
 * of RE2, matching in time linear in the input, whatever the pattern), never on the backtracking engine. A
 * pattern RE2 cannot run in linear time (a back-reference, a lookaround) refuses the tool.
 *
 * Why re2js: `re2` (the native binding) needs a compiled addon, built with node-gyp where no prebuilt
 * binary can be fetched; re2-wasm is unmaintained; a ReDoS detector (recheck, safe-regex2) judges a
 * pattern but leaves it on the backtracking engine, and can be wrong either way. re2js has no dependency
 * and no build step; only the servers' own patterns run on it.
 */
import { RE2JS } from 're2js';
import { z } from 'zod';

/** The bounds of one tool's input schema (McpToolsOptions.schemaLimits). */
export interface SchemaLimits {
  /** Bytes of the schema as JSON (default 32 KiB). */
  maxBytes: number;
  /** Nesting of JSON objects and arrays (default 32). */
  maxDepth: number;
  /** anyOf / oneOf / allOf / not / if-then-else inside one another (default 4). */
  maxCombinatorDepth: number;
  /** Subschemas under combinators, in all (default 128). */
  maxCombinatorBranches: number;
  /** Regular expressions (default 64), each at most `maxPatternLength` characters (default 512). */
  maxPatterns: number;
  maxPatternLength: number;
}

export const DEFAULT_SCHEMA_LIMITS: SchemaLimits = {
  maxBytes: 32 * 1024,
  maxDepth: 32,
  maxCombinatorDepth: 4,
  maxCombinatorBranches: 128,
  maxPatterns: 64,
  maxPatternLength: 512,
};

/** Why a tool's schema was refused: a reason code (a log field, a metric label) and a sentence. */
export interface SchemaRefusal {
  reason:
    | 'schema_too_large'
    | 'schema_too_deep'
    | 'combinators_too_deep'
    | 'too_many_combinators'
    | 'too_many_patterns'
    | 'pattern_too_long'
    | 'pattern_not_linear'
    | 'schema_invalid';
  message: string;
}

const COMBINATORS = new Set(['anyOf', 'oneOf', 'allOf', 'not', 'if', 'then', 'else']);

/** The schema's regular expressions, or why it is refused. An iterative walk: a deep schema cannot overflow the stack. */
export function checkSchema(schema: unknown, limits: SchemaLimits): { patterns: Set<string> } | SchemaRefusal {
  let json: string;
  try {
    json = JSON.stringify(schema) ?? '';
  } catch {
    return { reason: 'schema_invalid', message: 'the schema is not JSON' };
  }
  if (json.length > limits.maxBytes)
    return { reason: 'schema_too_large', message: `the schema has ${json.length} bytes (at most ${limits.maxBytes})` };
  const patterns = new Set<string>();
  let branches = 0;
  const stack: { v: unknown; depth: number; combinators: number }[] = [{ v: schema, depth: 0, combinators: 0 }];
  while (stack.length > 0) {
    const { v, depth, combinators } = stack.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    if (depth > limits.maxDepth)
      return { reason: 'schema_too_deep', message: `the schema nests deeper than ${limits.maxDepth} levels` };
    if (combinators > limits.maxCombinatorDepth)
      return {
        reason: 'combinators_too_deep',
        message: `combinators (anyOf, oneOf, allOf, not, if) nest deeper than ${limits.maxCombinatorDepth}`,
      };
    const entries: [string | number, unknown][] = Array.isArray(v)
      ? [...(v as unknown[]).entries()]
      : Object.entries(v as Record<string, unknown>);
    for (const [k, x] of entries) {
      const combinator = !Array.isArray(v) && COMBINATORS.has(k as string);
      if (combinator) branches += Array.isArray(x) ? x.length : 1;
      if (!Array.isArray(v) && k === 'pattern' && typeof x === 'string') patterns.add(x);
      if (!Array.isArray(v) && k === 'patternProperties' && typeof x === 'object' && x !== null)
        for (const p of Object.keys(x)) patterns.add(p);
      stack.push({ v: x, depth: depth + 1, combinators: combinators + (combinator ? 1 : 0) });
    }
    if (branches > limits.maxCombinatorBranches)
      return {
        reason: 'too_many_combinators',
        message: `more than ${limits.maxCombinatorBranches} subschemas under combinators`,
      };
  }
  if (patterns.size > limits.maxPatterns)
    return { reason: 'too_many_patterns', message: `more than ${limits.maxPatterns} regular expressions` };
  for (const p of patterns) {
    if (p.length > limits.maxPatternLength)
      return {
        reason: 'pattern_too_long',
        message: `a pattern has ${p.length} characters (at most ${limits.maxPatternLength})`,
      };
    if (!linear(p))
      return {
        reason: 'pattern_not_linear',
        message: 'a pattern needs backtracking (a back-reference or a lookaround): RE2 cannot run it',
      };
  }
  return { patterns };
}

const compiled = new Map<string, RE2JS>();

/** The pattern on RE2, compiled once per process (a server's patterns are few and fixed at boot). */
function re2(pattern: string): RE2JS {
  let re = compiled.get(pattern);
  if (!re) {
    re = RE2JS.compile(RE2JS.translateRegExp(pattern));
    compiled.set(pattern, re);
  }
  return re;
}

function linear(pattern: string): boolean {
  try {
    re2(pattern);
    return true;
  } catch {
    return false;
  }
}

/**
 * zod's fromJSONSchema over an accepted schema, with its patterns on RE2: zod builds each `pattern` (and each key of
 * `patternProperties`) with `new RegExp(...)` inside the conversion and later calls only its `test`. For the length
 * of this synchronous call, RegExp is a subclass whose `test` runs a server's pattern on RE2 (its `source` and
 * everything else stay those of the pattern, so the JSON Schema zod gives back, and the tools hash, are unchanged);
 * any other expression (zod's own formats) stays a plain RegExp.
 */
export function schemaToZod(schema: Record<string, unknown>, patterns: ReadonlySet<string>): z.ZodType {
  if (patterns.size === 0) return z.fromJSONSchema(schema);
  const Native = globalThis.RegExp;
  class ServerPattern extends Native {
    readonly #re2: RE2JS | undefined;
    constructor(source: string | RegExp, flags?: string) {
      super(source, flags);
      const text = typeof source === 'string' ? source : source.source;
      // Flags change the meaning: zod gives a server's pattern none.
      this.#re2 = !flags && patterns.has(text) ? re2(text) : undefined;
    }
    override test(input: string): boolean {
      return this.#re2 ? this.#re2.matcher(String(input)).find() : super.test(input);
    }
  }
  globalThis.RegExp = ServerPattern as unknown as RegExpConstructor;
  try {
    return z.fromJSONSchema(schema);
  } finally {
    globalThis.RegExp = Native;
  }
}
