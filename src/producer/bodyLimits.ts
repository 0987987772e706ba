/**
 * Limits of request bodies, shared by the JSON API and the signed webhooks:
 * an oversized body is a 413 naming the limit, a body nested deeper than
 * MAX_BODY_DEPTH is a 400 (deep values would otherwise reach recursive code:
 * canonical JSON of tool arguments, JSON.stringify of evidence).
 *
 * Every string of a body must be well-formed Unicode: JSON may escape a lone
 * UTF-16 surrogate (`"\ud800"`), which Redis's JSON decoder refuses inside a
 * script. This is decided here, once for every body, and answered 400 naming
 * the field, so no schema or script has to know about it.
 */
import type { Response } from 'express';

export const BODY_LIMIT = '1mb';
/** BODY_LIMIT in bytes, as express counts `1mb`. */
export const BODY_LIMIT_BYTES = 1024 * 1024;
export const MAX_BODY_DEPTH = 32;

/**
 * Whether `value` nests objects/arrays deeper than `max` levels (iterative: no stack to blow). Two parallel stacks, not
 * a pair per value: every body of every request is walked, and the pairs were garbage.
 */
export function nestedDeeperThan(value: unknown, max = MAX_BODY_DEPTH): boolean {
  const values: unknown[] = [value];
  const depths: number[] = [1];
  while (values.length > 0) {
    const v = values.pop();
    const depth = depths.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth > max) return true;
    for (const child of Array.isArray(v) ? (v as unknown[]) : Object.values(v))
      if (child !== null && typeof child === 'object') {
        values.push(child);
        depths.push(depth + 1);
      }
  }
  return false;
}

// With the u flag a pair is one code point: only a lone surrogate is a code point of category Cs.
const LONE_SURROGATE = /\p{Cs}/u;
const wellFormed = (s: string): boolean => !LONE_SURROGATE.test(s);

/**
 * The path of the first string (value or key) in `value` that is not well-formed Unicode, or undefined. Nearly every
 * body has none: it is checked first without naming any path (allWellFormed), and walked again with paths only when
 * one is found.
 */
export function illFormedStringPath(value: unknown): string | undefined {
  return allWellFormed(value) ? undefined : firstIllFormedPath(value);
}

/** Whether every string of `value`, keys included, is well-formed (an array's keys are indices: nothing to check). */
function allWellFormed(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') {
      if (!wellFormed(v)) return false;
    } else if (Array.isArray(v)) {
      for (const child of v as unknown[]) stack.push(child);
    } else if (v !== null && typeof v === 'object') {
      for (const key of Object.keys(v)) {
        if (!wellFormed(key)) return false;
        stack.push((v as Record<string, unknown>)[key]);
      }
    }
  }
  return true;
}

function firstIllFormedPath(value: unknown): string | undefined {
  const stack: [unknown, string[]][] = [[value, []]];
  while (stack.length > 0) {
    const [v, path] = stack.pop()!;
    if (typeof v === 'string' && !wellFormed(v)) return path.join('.') || '(body)';
    if (v === null || typeof v !== 'object') continue;
    for (const [key, child] of Object.entries(v)) {
      if (!wellFormed(key)) return [...path, '(key)'].join('.');
      stack.push([child, [...path, key]]);
    }
  }
  return undefined;
}

export function bodyIllFormed(res: Response, path: string): void {
  res.status(400).json({
    error: 'invalid_request',
    fields: [{ path, message: 'not well-formed Unicode (a lone UTF-16 surrogate)' }],
  });
}

export function bodyTooLarge(res: Response): void {
  res
    .status(413)
    .json({ error: 'too_large', limit: BODY_LIMIT, message: `the request body is over the ${BODY_LIMIT} limit` });
}

export function bodyTooDeep(res: Response): void {
  res.status(400).json({
    error: 'invalid_request',
    fields: [{ path: '(body)', message: `nested deeper than ${MAX_BODY_DEPTH} levels` }],
  });
}

/** express's body-parser errors (too large, bad JSON, bad charset, aborted): a 4xx that says which, never a 500. */
export function bodyParserError(err: { status?: number; type?: string }, res: Response): boolean {
  if (err.type === 'entity.too.large') return (bodyTooLarge(res), true);
  if (err.type === 'entity.parse.failed') {
    res.status(400).json({ error: 'invalid_json', fields: [{ path: '(body)', message: 'body is not valid JSON' }] });
    return true;
  }
  if (typeof err.type === 'string' && typeof err.status === 'number' && err.status >= 400 && err.status < 500) {
    res.status(err.status).json({ error: 'invalid_request', message: err.type });
    return true;
  }
  return false;
}
