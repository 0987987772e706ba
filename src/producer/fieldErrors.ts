/** Shared HTTP helpers of the operator routes. */
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
