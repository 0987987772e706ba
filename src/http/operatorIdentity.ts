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
 *
 * A JWT that is no operator is told apart for the operators of the fleet, never for the caller (the answer is the
 * same 401): the identity provider or its keys could not be used (`oidc_unavailable`, logged at warn with the error)
 * or the token was refused (`oidc_token_refused`, logged at info with the reason); both are counted in
 * agent_operator_auth_failures_total{method="oidc", reason}. Neither log line carries the token or its claims.
 */
import { createHash, createPublicKey, timingSafeEqual, type KeyObject } from 'node:crypto';
import { createRemoteJWKSet, errors as joseErrors, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import type { Logger } from 'pino';
import type { Config } from '../config/config.js';
import type { Metrics } from '../metrics/metrics.js';
import { TENANT_NAME_FORMAT } from '../core/tenant.js';

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

/** What a directory is built from: the identity settings, and the process's metrics and log it reports to. */
export interface DirectoryDeps {
  cfg: IdentityConfig;
  metrics: Pick<Metrics, 'operatorAuthFailures'>;
  log: Logger;
}

/**
 * Why a JWT was no operator because the identity provider or its keys could not be used (log code oidc_unavailable):
 * the JWKS endpoint unreachable, timing out or answering other than 200 (idp_unreachable); its answer not JSON, not a
 * key set, or its keys unusable (jwks_invalid); no key of the set matches the token's kid and algorithm, after a
 * refresh of the set (no_matching_key).
 */
export const OIDC_UNAVAILABLE_REASONS = ['idp_unreachable', 'jwks_invalid', 'no_matching_key'] as const;
/**
 * Why a JWT was refused (log code oidc_token_refused): its signature does not verify (bad_signature), it expired
 * (expired), another issuer or audience (wrong_issuer, wrong_audience), another claim check failed: nbf, iat, a
 * missing exp or name, a lifetime over JWT_MAX_LIFETIME_S, a tenants claim listing other than tenant names
 * (claim_invalid), not a well-formed JWS/JWT or an algorithm not in OIDC_ALGORITHMS (malformed), verified but no
 * known role (no_role).
 */
export const OIDC_REFUSED_REASONS = [
  'bad_signature',
  'expired',
  'wrong_issuer',
  'wrong_audience',
  'claim_invalid',
  'malformed',
  'no_role',
] as const;
export type OidcUnavailableReason = (typeof OIDC_UNAVAILABLE_REASONS)[number];
export type OidcRefusedReason = (typeof OIDC_REFUSED_REASONS)[number];

/** An error of the key source (the JWKS fetch and key selection), told apart from the token's own checks. */
class KeySourceError extends Error {
  constructor(
    readonly error: unknown,
    readonly kid: string | undefined,
  ) {
    super('OIDC key source failed');
  }
}

/** The reason an error of the key source is counted under. */
export function unavailableReason(err: unknown): OidcUnavailableReason {
  if (err instanceof joseErrors.JWKSNoMatchingKey || err instanceof joseErrors.JWKSMultipleMatchingKeys)
    return 'no_matching_key';
  if (
    err instanceof joseErrors.JWKSInvalid ||
    err instanceof joseErrors.JWKInvalid ||
    err instanceof joseErrors.JOSENotSupported
  )
    return 'jwks_invalid';
  // jose's own error for an answer that is not JSON ("Failed to parse ... as JSON"); an answer other than 200 is
  // another plain JOSEError ("Expected 200 OK ...").
  if (err instanceof joseErrors.JOSEError && err.code === 'ERR_JOSE_GENERIC' && /failed to parse/i.test(err.message))
    return 'jwks_invalid';
  // JWKSTimeout, a non-200 answer, and fetch's own errors (connection refused, DNS, TLS).
  return 'idp_unreachable';
}

/** The reason a token's own check failure is counted under (an error of jwtVerify not from the key source). */
export function refusedReason(err: unknown): OidcRefusedReason {
  if (err instanceof joseErrors.JWTExpired) return err.claim === 'exp' ? 'expired' : 'claim_invalid';
  if (err instanceof joseErrors.JWTClaimValidationFailed) {
    if (err.claim === 'iss') return 'wrong_issuer';
    if (err.claim === 'aud') return 'wrong_audience';
    return 'claim_invalid';
  }
  if (
    err instanceof joseErrors.JWSInvalid ||
    err instanceof joseErrors.JWTInvalid ||
    err instanceof joseErrors.JOSEAlgNotAllowed ||
    err instanceof joseErrors.JOSENotSupported
  )
    return 'malformed';
  // JWSSignatureVerificationFailed, and WebCrypto's refusal of a configured key that does not fit the token's
  // algorithm: the token was not signed with the key this deployment trusts.
  return 'bad_signature';
}

/** A kid fit for a log line (it is the caller's text): short and plain, else left out. */
function loggableKid(kid: unknown): string | undefined {
  return typeof kid === 'string' && /^[\w.:-]{1,64}$/.test(kid) ? kid : undefined;
}

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
  private readonly jwtKey: JWTVerifyGetKey | KeyObject | undefined;
  private readonly sharedDigest: Buffer | undefined;
  private readonly cfg: IdentityConfig;
  private readonly metrics: DirectoryDeps['metrics'];
  private readonly log: Logger;

  constructor({ cfg, metrics, log }: DirectoryDeps) {
    this.cfg = cfg;
    this.metrics = metrics;
    this.log = log;
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
    else if (cfg.OIDC_JWKS_URL !== undefined) {
      const jwks = createRemoteJWKSet(new URL(cfg.OIDC_JWKS_URL));
      // Whatever the key set throws (fetch, parse, key selection after a refresh) is the provider's side, not the
      // token's: marked so fromJwt tells the two apart.
      this.jwtKey = async (header, token) => {
        try {
          return await jwks(header, token);
        } catch (err) {
          throw new KeySourceError(err, loggableKid(header.kid));
        }
      };
    } else this.jwtKey = createPublicKey(cfg.OIDC_PUBLIC_KEY!);
    if (this.jwtKey !== undefined) {
      // Every reason's series exists from the start (at 0), so rate() sees the first failure.
      for (const reason of [...OIDC_UNAVAILABLE_REASONS, ...OIDC_REFUSED_REASONS])
        metrics.operatorAuthFailures.inc({ method: 'oidc', reason }, 0);
    }
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
    } catch (err) {
      // No operator (401) either way, and the caller is not told which: the fleet's operators are.
      if (err instanceof KeySourceError) this.unavailable(err);
      else this.refused(refusedReason(err), err);
      return undefined;
    }
    if (!lifetimeAllowed(payload, Date.now() / 1000)) return void this.refused('claim_invalid');
    const operator = operatorOfClaims(payload, this.cfg);
    if (operator !== undefined) return operator;
    if (nameOfClaims(payload, this.cfg) === undefined) this.refused('claim_invalid');
    else if (tenantsOfClaims(payload, this.cfg) === undefined)
      this.refused('claim_invalid', { claim: this.cfg.OIDC_TENANTS_CLAIM });
    else this.refused('no_role');
    return undefined;
  }

  /** The identity provider or its keys could not be used: warn with the error (a fetch or key-set error: no token). */
  private unavailable({ error, kid }: KeySourceError): void {
    const reason = unavailableReason(error);
    this.metrics.operatorAuthFailures.inc({ method: 'oidc', reason });
    const jwksHost = this.cfg.OIDC_JWKS_URL !== undefined ? new URL(this.cfg.OIDC_JWKS_URL).host : undefined;
    this.log.warn(
      { code: 'oidc_unavailable', method: 'oidc', reason, jwksHost, ...(kid !== undefined ? { kid } : {}), err: error },
      'OIDC identity provider keys unavailable: the operator bearer was refused (401)',
    );
  }

  /**
   * A token refused: info with the reason, the error's type and the claim that failed (its name only). Never the
   * error itself: jose's claim errors carry the whole payload (the operator's email and more).
   */
  private refused(reason: OidcRefusedReason, err?: unknown): void {
    this.metrics.operatorAuthFailures.inc({ method: 'oidc', reason });
    const claim = (err as { claim?: unknown } | undefined)?.claim;
    this.log.info(
      {
        code: 'oidc_token_refused',
        method: 'oidc',
        reason,
        ...(err instanceof Error ? { errorType: err.name } : {}),
        ...(typeof claim === 'string' && /^[\w-]{1,40}$/.test(claim) ? { claim } : {}),
      },
      'OIDC bearer refused (401)',
    );
  }
}

/** A JWT must not be issued in the future (beyond the skew), nor claim to live longer than JWT_MAX_LIFETIME_S. */
export function lifetimeAllowed(payload: JWTPayload, nowS: number): boolean {
  if (payload.exp === undefined) return false;
  if (payload.iat !== undefined && payload.iat > nowS + JWT_CLOCK_SKEW_S) return false;
  const from = payload.iat ?? nowS;
  return payload.exp - from <= JWT_MAX_LIFETIME_S + JWT_CLOCK_SKEW_S;
}

/**
 * The operator a verified JWT's claims describe, or undefined when its name or role is missing or unknown, or its
 * tenants claim is not one (tenantsOfClaims).
 */
export function operatorOfClaims(
  payload: JWTPayload,
  cfg: Pick<IdentityConfig, 'OIDC_NAME_CLAIM' | 'OIDC_ROLE_CLAIM' | 'OIDC_TENANTS_CLAIM'>,
): Operator | undefined {
  const claim = (name: string): unknown => (payload as Record<string, unknown>)[name];
  const name = nameOfClaims(payload, cfg);
  if (name === undefined) return undefined;
  const roles = ([] as unknown[]).concat(claim(cfg.OIDC_ROLE_CLAIM) ?? []);
  const role: OperatorRole | undefined = roles.includes('operator')
    ? 'operator'
    : roles.includes('viewer')
      ? 'viewer'
      : undefined;
  if (role === undefined) return undefined;
  const tenants = tenantsOfClaims(payload, cfg);
  if (tenants === undefined) return undefined;
  return { name, role, tenants, ...(payload.exp !== undefined ? { expiresAt: payload.exp * 1000 } : {}) };
}

/**
 * The operator's tenants a JWT's claims give: every tenant for the string "*" alone, else the tenant names it lists
 * (none: no tenant). Undefined when an entry is no tenant's name: "*" in a list is not every tenant but the name of the
 * search index every tenant's runs are in (src/core/tenant.ts), so such a token is refused, never read either way.
 */
function tenantsOfClaims(
  payload: JWTPayload,
  cfg: Pick<IdentityConfig, 'OIDC_TENANTS_CLAIM'>,
): Operator['tenants'] | undefined {
  const raw = (payload as Record<string, unknown>)[cfg.OIDC_TENANTS_CLAIM];
  if (raw === '*') return '*';
  const listed = ([] as unknown[]).concat(raw ?? []);
  return listed.every((t) => typeof t === 'string' && TENANT_NAME_FORMAT.test(t)) ? (listed as string[]) : undefined;
}

/** The operator's name a JWT's claims give (OIDC_NAME_CLAIM, else sub), or undefined when missing or unfit. */
function nameOfClaims(payload: JWTPayload, cfg: Pick<IdentityConfig, 'OIDC_NAME_CLAIM'>): string | undefined {
  const name = (payload as Record<string, unknown>)[cfg.OIDC_NAME_CLAIM] ?? payload.sub;
  return typeof name === 'string' && name.length > 0 && name.length <= 200 ? name : undefined;
}

const directories = new WeakMap<object, OperatorDirectory>();

/**
 * One directory per frozen config (one JWKS cache per process). A process has one context per config: its metrics
 * and log are the ones the directory reports to (the first caller's, for a config shared by several).
 */
export function directoryFor(deps: DirectoryDeps): OperatorDirectory {
  let dir = directories.get(deps.cfg);
  if (!dir) {
    dir = new OperatorDirectory(deps);
    directories.set(deps.cfg, dir);
  }
  return dir;
}
