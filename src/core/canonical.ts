/** RFC 8785 canonical JSON (the `canonicalize` package) and sha256 digests of it. */
import { createHash } from 'node:crypto';
import canonicalizeModule from 'canonicalize';
import { InvariantError } from './errors.js';

// The package is CommonJS with `module.exports = fn`; under NodeNext the default import is that function.
const canonicalize = canonicalizeModule as unknown as (input: unknown) => string | undefined;

export function canonicalJson(value: unknown): string {
  const out = canonicalize(value);
  if (out === undefined) throw new InvariantError('invalid_value', 'value cannot be canonicalized');
  return out;
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

export function fingerprint(value: unknown): string {
  return sha256Hex(canonicalJson(value));
}
