/** Shared HTTP helpers of the intake and operator routes. */
import type { Request, Response } from 'express';
import type { z } from 'zod';

/** An unknown field's name as an answer may show it: a plain name, else not at all (it is the sender's text). */
const SHOWN_FIELD_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * A refusal's fields, one per problem, with `head` before each path (an agent's input under `input`). The answer
 * names where, never echoes what was sent: zod's `Unrecognized key: "<its text>"` names an unknown field only when
 * it is a plain name.
 */
export function fieldsOf(error: z.ZodError, head?: string): { path: string; message: string }[] {
  return error.issues.map((i) => ({
    path: [...(head === undefined ? [] : [head]), ...i.path.map(String)].join('.') || '(body)',
    message:
      i.code === 'unrecognized_keys'
        ? `Unrecognized key${i.keys.length > 1 ? 's' : ''}: ${i.keys.map((k) => (SHOWN_FIELD_NAME.test(k) ? `"${k}"` : '(a name not shown)')).join(', ')}`
        : i.message,
  }));
}

export function invalid(res: Response, error: z.ZodError): void {
  res.status(400).json({ error: 'invalid_request', fields: fieldsOf(error) });
}

/**
 * A query parameter a route reads by hand (not through a schema): its one value, or undefined when absent. Given more
 * than once (`?tenant=a&tenant=b`, which express hands as an array) or as an object, a route that took only strings
 * would drop the filter and answer as if none were asked: it is a 400 naming the parameter instead, answered here
 * (null returned).
 */
export function singleQuery(req: Request, res: Response, name: string): string | undefined | null {
  const value = req.query[name];
  if (value === undefined || typeof value === 'string') return value;
  res.status(400).json({ error: 'invalid_request', fields: [{ path: name, message: 'one value, given once' }] });
  return null;
}

/** A route parameter as one string (express types allow arrays for wildcard params). */
export function param(value: string | string[] | undefined): string {
  return Array.isArray(value) ? value.join('/') : (value ?? '');
}

/**
 * A JSON answer as express's `res.json` writes it (`application/json; charset=utf-8`, its length), for the answers of
 * the intake routes, which every create pays for: `res.json` parses and formats the content type twice per call and
 * hashes the body for an ETag, which an answer to a POST never needs. One write of headers and body.
 */
export function answerJson(res: Response, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}
