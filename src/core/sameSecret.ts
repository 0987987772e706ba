/**
 * The one constant-time comparison of a secret a request presents with the one expected: bearer tokens, the board's
 * basic-auth credentials, the console's session signatures and CSRF tokens, webhook signatures. The SHA-256 digests of
 * both are compared, 32 bytes each whatever was given. timingSafeEqual throws on inputs of different byte lengths,
 * and a string's length is not its byte length ('é' is one character, two bytes in UTF-8): a compare that checked the
 * strings' lengths first let a forged cookie through to the throw, an unauthenticated 500.
 */
import { hash, timingSafeEqual } from 'node:crypto';

/** A secret's SHA-256 digest, what matchesDigest compares: a check of many requests against one setting keeps it. */
export function secretDigest(secret: string | Buffer): Buffer {
  return hash('sha256', secret, 'buffer');
}

/** True when `given` is the secret of `expected` (its secretDigest), in constant time. */
export function matchesDigest(given: string | Buffer, expected: Buffer): boolean {
  return timingSafeEqual(secretDigest(given), expected);
}

/** True when `given` is `expected`, in constant time whatever either holds. An absent or empty one matches nothing. */
export function sameSecret(given: string | Buffer | undefined, expected: string | Buffer | undefined): boolean {
  if (given === undefined || expected === undefined || given.length === 0 || expected.length === 0) return false;
  return matchesDigest(given, secretDigest(expected));
}
