/** Bearer-token checks with a constant-time compare. No token configured = open (development only; production config requires them). */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';

export function tokenMatches(given: string | undefined, expected: string): boolean {
  if (given === undefined) return false;
  // Hash both so the compare is constant-time whatever the lengths.
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

export function bearer(req: Request): string | undefined {
  const h = req.headers.authorization;
  return h?.startsWith('Bearer ') ? h.slice(7) : undefined;
}

export function requireToken(expected: string | undefined, role: string) {
  return (req: Request, res: Response, next: NextFunction) => {
    if (expected === undefined || tokenMatches(bearer(req), expected)) return next();
    res.status(401).json({ error: 'unauthorized', message: `a ${role} token is required` });
  };
}
