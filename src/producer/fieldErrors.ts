/** Shared HTTP helpers of the intake and operator routes. */
import type { Response } from 'express';
import type { z } from 'zod';

export function invalid(res: Response, error: z.ZodError): void {
  const fields = error.issues.map((i) => ({ path: i.path.join('.') || '(body)', message: i.message }));
  res.status(400).json({ error: 'invalid_request', fields });
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
