/**
 * Who is acting: the operator behind a credential.
 *
 * Three sources, tried in this order for a bearer token:
 *  - OPERATOR_TOKEN: one operator named `operator`, role operator, every tenant (the
 *    single shared token of earlier releases, kept working);
 *  - OPERATORS / OPERATORS_FILE: per-operator tokens, configured as their sha256 only
 *    (the token never sits in configuration), each with a role and tenants;
 *  - OIDC_ISSUER: a JWT from the identity provider, verified with `jose` (signature
 *    against the issuer's JWKS or a configured public key, issuer, audience, expiry),
 *    the name, role and tenants read from configured claims.
 *
 * A token that matches nothing, or a JWT that fails any check, is no operator
 * (the caller answers 401); a JWT without a known role is no operator either:
 * nobody gets a role by default. The operator's name is what every action
 * records: it never comes from the request body.
 */
import { createHash, createPublicKey, timingSafeEqual, type KeyObject } from 'node:crypto';
import { createRemoteJWKSet, jwtVerify, type JWTPayload } from 'jose';
import type { Config } from '../config/config.js';

export type OperatorRole = 'viewer' | 'operator';

export interface Operator {
  name: string;
  role: OperatorRole;
  /** '*' for every tenant, else the tenants this operator sees (others' runs are 404). */
  tenants: '*' | readonly string[];
  /** When the credential stops being valid (a JWT's exp), ms; undefined = no expiry. */
  expiresAt?: number;
}

type IdentityConfig = Pick<
  Config,
  | 'OPERATOR_TOKEN'
  | 'OPERATORS'
  | 'OIDC_ISSUER'
  | 'OIDC_AUDIENCE'
  | 'OIDC_JWKS_URL'
  | 'OIDC_PUBLIC_KEY'
  | 'OIDC_ALGORITHMS'
  | 'OIDC_NAME_CLAIM'
  | 'OIDC_ROLE_CLAIM'
  | 'OIDC_TENANTS_CLAIM'
>;

/** The shared OPERATOR_TOKEN's operator. */
export const SHARED_OPERATOR: Operator = Object.freeze({ name: 'operator', role: 'operator', tenants: '*' });

/** Clock skew allowed between the identity provider and this process, on exp, nbf and iat. */
export const JWT_CLOCK_SKEW_S = 60;
/** The longest lifetime (exp - iat, or exp - now without iat) a JWT may claim: a token valid for ever is no session. */
export const JWT_MAX_LIFETIME_S = 24 * 3600;

const JWT_SHAPE = /^[\w-]+\.[\w-]+\.[\w-]+$/;

/**
 * What a console session remembers of the credential it was opened with: a digest of the token's sha256 (the
 * form OPERATORS holds it in), so the directory can tell which configured credential it was without the token.
 */
export function credentialFingerprint(token: string): string {
  return fingerprintOfDigest(createHash('sha256').update(token).digest());
}

function fingerprintOfDigest(digest: Buffer): string {
  return createHash('sha256').update('console-session-credential\0').update(digest).digest('hex');
}

function sameOperator(a: Operator, b: Operator): boolean {
  const tenants = (o: Operator) => (o.tenants === '*' ? '*' : [...o.tenants].sort().join('\0'));
  return a.name === b.name && a.role === b.role && tenants(a) === tenants(b);
}

export class OperatorDirectory {
  private readonly byDigest: { digest: Buffer; operator: Operator }[];
  private readonly jwtKey: ReturnType<typeof createRemoteJWKSet> | KeyObject | undefined;
  private readonly sharedDigest: Buffer | undefined;

  constructor(private readonly cfg: IdentityConfig) {
    this.sharedDigest =
      cfg.OPERATOR_TOKEN !== undefined ? createHash('sha256').update(cfg.OPERATOR_TOKEN).digest() : undefined;
    this.byDigest = cfg.OPERATORS.map((o) => ({
      digest: Buffer.from(o.tokenSha256, 'hex'),
      operator: Object.freeze({
        name: o.name,
        role: o.role,
        tenants: o.tenants === '*' ? '*' : Object.freeze([...o.tenants]),
      }),
    }));
    if (cfg.OIDC_ISSUER === undefined) this.jwtKey = undefined;
    else if (cfg.OIDC_JWKS_URL !== undefined) this.jwtKey = createRemoteJWKSet(new URL(cfg.OIDC_JWKS_URL));
    else this.jwtKey = createPublicKey(cfg.OIDC_PUBLIC_KEY!);
  }

  /** Whether any operator credential is configured (else operator routes answer 503). */
  get configured(): boolean {
    return this.cfg.OPERATOR_TOKEN !== undefined || this.byDigest.length > 0 || this.jwtKey !== undefined;
  }

  /**
   * The operator a console session stands for now, or undefined when its credential is gone or names someone else
   * (removed from OPERATORS, role or tenants changed, OPERATOR_TOKEN rotated). A session opened with a JWT is kept
   * while OIDC is configured: its lifetime is the JWT's, capped (see fromJwt), and the token is not stored.
   */
  sessionOperator(fingerprint: string, stored: Operator): Operator | undefined {
    if (stored.expiresAt !== undefined) return this.jwtKey !== undefined ? stored : undefined;
    const current =
      this.sharedDigest !== undefined && fingerprintOfDigest(this.sharedDigest) === fingerprint
        ? SHARED_OPERATOR
        : this.byDigest.find((e) => fingerprintOfDigest(e.digest) === fingerprint)?.operator;
    return current !== undefined && sameOperator(current, stored) ? current : undefined;
  }

  /** The operator a bearer token names, or undefined. Every configured token is compared (constant time each). */
  async authenticate(token: string | undefined): Promise<Operator | undefined> {
    if (token === undefined || token === '') return undefined;
    let found: Operator | undefined;
    const digest = createHash('sha256').update(token).digest();
    // Digests of equal length: a constant-time compare whatever the token lengths (as auth.ts tokenMatches).
    if (this.sharedDigest !== undefined && timingSafeEqual(digest, this.sharedDigest)) found = SHARED_OPERATOR;
    for (const entry of this.byDigest) {
      if (timingSafeEqual(digest, entry.digest)) found ??= entry.operator; // both 32 bytes: constant time
    }
    if (found) return found;
    if (this.jwtKey !== undefined && JWT_SHAPE.test(token)) return this.fromJwt(token);
    return undefined;
  }

  private async fromJwt(token: string): Promise<Operator | undefined> {
    let payload: JWTPayload;
    try {
      const opts = {
        issuer: this.cfg.OIDC_ISSUER!,
        audience: this.cfg.OIDC_AUDIENCE!,
        algorithms: this.cfg.OIDC_ALGORITHMS,
        requiredClaims: ['exp'],
        clockTolerance: JWT_CLOCK_SKEW_S,
      };
      // Two call shapes (a key set is a function of the header, a key is a key): same checks either way.
      const key = this.jwtKey!;
      ({ payload } = typeof key === 'function' ? await jwtVerify(token, key, opts) : await jwtVerify(token, key, opts));
    } catch {
      // Bad signature, wrong issuer or audience, expired, JWKS unreachable: no operator (401). The reason is not told
      // to the caller.
      return undefined;
    }
    return lifetimeAllowed(payload, Date.now() / 1000) ? operatorOfClaims(payload, this.cfg) : undefined;
  }
}

/** A JWT must not be issued in the future (beyond the skew), nor claim to live longer than JWT_MAX_LIFETIME_S. */
export function lifetimeAllowed(payload: JWTPayload, nowS: number): boolean {
  if (payload.exp === undefined) return false;
  if (payload.iat !== undefined && payload.iat > nowS + JWT_CLOCK_SKEW_S) return false;
  const from = payload.iat ?? nowS;
  return payload.exp - from <= JWT_MAX_LIFETIME_S + JWT_CLOCK_SKEW_S;
}

/** The operator a verified JWT's claims describe, or undefined when its name or role is missing or unknown. */
export function operatorOfClaims(
  payload: JWTPayload,
  cfg: Pick<IdentityConfig, 'OIDC_NAME_CLAIM' | 'OIDC_ROLE_CLAIM' | 'OIDC_TENANTS_CLAIM'>,
): Operator | undefined {
  const claim = (name: string): unknown => (payload as Record<string, unknown>)[name];
  const name = claim(cfg.OIDC_NAME_CLAIM) ?? payload.sub;
  if (typeof name !== 'string' || name.length === 0 || name.length > 200) return undefined;
  const roles = ([] as unknown[]).concat(claim(cfg.OIDC_ROLE_CLAIM) ?? []);
  const role: OperatorRole | undefined = roles.includes('operator')
    ? 'operator'
    : roles.includes('viewer')
      ? 'viewer'
      : undefined;
  if (role === undefined) return undefined;
  const rawTenants = claim(cfg.OIDC_TENANTS_CLAIM);
  const tenants =
    rawTenants === '*'
      ? '*'
      : ([] as unknown[]).concat(rawTenants ?? []).filter((t): t is string => typeof t === 'string');
  return { name, role, tenants, ...(payload.exp !== undefined ? { expiresAt: payload.exp * 1000 } : {}) };
}

const directories = new WeakMap<object, OperatorDirectory>();

/** One directory per frozen config (one JWKS cache per process). */
export function directoryFor(cfg: IdentityConfig): OperatorDirectory {
  let dir = directories.get(cfg);
  if (!dir) {
    dir = new OperatorDirectory(cfg);
    directories.set(cfg, dir);
  }
  return dir;
}
