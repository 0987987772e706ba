/**
 * RFC 8785 canonical JSON, used to decide "same body" for a reused
 * Idempotency-Key regardless of key order or whitespace.
 */
import canonicalizeModule from 'canonicalize';

// The package is CommonJS (module.exports = fn) while its .d.ts declares
// `export default`; under NodeNext that types the default import as the
// module object. At runtime the default import is the function itself.
type Canonicalize = (input: unknown) => string | undefined;
const mod = canonicalizeModule as unknown as Canonicalize | { default: Canonicalize };
const canonicalize: Canonicalize = typeof mod === 'function' ? mod : mod.default;

/** Canonical form of a JSON value (bodies here are already-parsed JSON, so never undefined). */
export function canonicalJson(value: unknown): string {
  return canonicalize(value) ?? 'null';
}
