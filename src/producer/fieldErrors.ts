/** Shared HTTP helpers of the intake and operator routes. */
import type { Request, Response } from 'express';
import type { z } from 'zod';

export function invalid(res: Response, error: z.ZodError): void {
  const fields = error.issues.map((i) => ({ path: i.path.join('.') || '(body)', message: i.message }));
  res.status(400).json({ error: 'invalid_request', fields });
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
