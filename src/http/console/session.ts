/**
 * Console login sessions. A login (the operator's token or JWT, checked by
 * src/http/operatorIdentity.ts) creates a session in Redis (a random 256-bit id,
 * the operator, a CSRF token, PX = CONSOLE_SESSION_TTL_MS, never past a JWT's
 * exp) and sets the cookie `console_session=<id>.<HMAC-SHA256(id)>`: HttpOnly
 * (no script reads it), SameSite=Strict (no other site's page sends it),
 * Path=/, Secure behind HTTPS. Logout deletes the session: the cookie is then
 * worth nothing. A cookie whose signature does not match is never looked up.
 *
 * The session's CSRF token (synchronizer pattern) is in every console form; a
 * POST without it, or with another, is refused (403) before anything happens.
 *
 * Access ends when the credential ends: every request made with a session is
 * checked against the operator directory as it is now (the credential's
 * fingerprint must still name the same name, role and tenants) and against the
 * operator's session epoch (bumped by POST /v1/operators/:name/sessions/end);
 * a session that no longer matches is deleted and the request is not logged in.
 */
import { createHmac, randomBytes } from 'node:crypto';
import type { Request, Response } from 'express';
import type { EngineContext } from '../../runs/engineContext.js';
import { credentialFingerprint, directoryFor, type Operator } from '../operatorIdentity.js';
import { sameSecret } from '../../core/sameSecret.js';

export const SESSION_COOKIE = 'console_session';
/** Double-submit token of the login form (there is no session yet to hold one). */
export const LOGIN_CSRF_COOKIE = 'console_login_csrf';

export interface Session {
  operator: Operator;
  csrf: string;
  /** credentialFingerprint of the token the session was opened with. */
  credential: string;
  /** The operator's session epoch at login: a later one ends this session. */
  epoch: number;
}

/**
 * Cookies of a request (no dependency: a Cookie header is `a=b; c=d`). A cookie that does not decode
 * (`pref=100%`, set by another app on the same host) is skipped: it is not ours and must not lock anyone out.
 */
export function cookies(req: Request): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const i = part.indexOf('=');
    if (i <= 0) continue;
    const value = decodedOrUndefined(part.slice(i + 1).trim());
    if (value !== undefined) out[part.slice(0, i).trim()] = value;
  }
  return out;
}

function decodedOrUndefined(value: string): string | undefined {
  try {
    return decodeURIComponent(value);
  } catch {
    return undefined;
  }
}

export function cookieFlags(req: Request, maxAgeMs?: number): string {
  return `Path=/; HttpOnly; SameSite=Strict${req.secure ? '; Secure' : ''}${maxAgeMs !== undefined ? `; Max-Age=${Math.floor(maxAgeMs / 1000)}` : ''}`;
}

export class ConsoleSessions {
  /** Undefined when the console may not sign sessions (production without CONSOLE_SESSION_SECRET). */
  private readonly secret: Buffer | undefined;

  constructor(private readonly ctx: Pick<EngineContext, 'redis' | 'keys' | 'cfg' | 'log' | 'metrics'>) {
    const configured = ctx.cfg.CONSOLE_SESSION_SECRET;
    // Development without a secret: one per process (sessions end when it restarts; other replicas refuse them).
    this.secret =
      configured !== undefined
        ? Buffer.from(configured)
        : ctx.cfg.APP_MODE === 'development'
          ? randomBytes(32)
          : undefined;
  }

  get enabled(): boolean {
    return this.secret !== undefined;
  }

  private sign(id: string): string {
    return createHmac('sha256', this.secret!).update(id).digest('base64url');
  }

  async create(req: Request, res: Response, operator: Operator, token: string): Promise<Session> {
    const id = randomBytes(32).toString('base64url');
    const epoch = Number((await this.ctx.redis.get(this.ctx.keys.consoleSessionEpoch(operator.name))) ?? 0);
    const session: Session = {
      operator,
      csrf: randomBytes(24).toString('base64url'),
      credential: credentialFingerprint(token),
      epoch,
    };
    const ttl = Math.min(
      this.ctx.cfg.CONSOLE_SESSION_TTL_MS,
      operator.expiresAt !== undefined ? operator.expiresAt - Date.now() : Infinity,
    );
    if (ttl <= 0) throw new Error('session: the credential has already expired');
    await this.ctx.redis.set(this.ctx.keys.consoleSession(id), JSON.stringify(session), 'PX', Math.floor(ttl));
    res.append('set-cookie', `${SESSION_COOKIE}=${id}.${this.sign(id)}; ${cookieFlags(req, ttl)}`);
    return session;
  }

  /** The session of a request's cookie, or undefined (none, bad signature, expired, logged out). */
  async read(req: Request): Promise<Session | undefined> {
    if (!this.secret) return undefined;
    const raw = cookies(req)[SESSION_COOKIE];
    const dot = raw?.lastIndexOf('.') ?? -1;
    if (!raw || dot <= 0) return undefined;
    const id = raw.slice(0, dot);
    if (!/^[\w-]{43}$/.test(id) || !sameSecret(raw.slice(dot + 1), this.sign(id))) return undefined;
    const stored = await this.ctx.redis.get(this.ctx.keys.consoleSession(id));
    if (!stored) return undefined;
    const session = JSON.parse(stored) as Partial<Session> & Pick<Session, 'operator' | 'csrf'>;
    const current = await this.stillValid(session);
    if (current) return { ...session, operator: current } as Session;
    await this.ctx.redis.del(this.ctx.keys.consoleSession(id));
    this.ctx.log.info(
      { code: 'console_session_revoked', operator: session.operator.name },
      'console session no longer matches its operator',
    );
    return undefined;
  }

  /** The session's operator as the directory and epoch have it now, or undefined (then the session is over). */
  private async stillValid(session: Partial<Session> & Pick<Session, 'operator'>): Promise<Operator | undefined> {
    // A session written before fingerprints were kept cannot be checked: it ends (the operator logs in again).
    if (session.credential === undefined || session.epoch === undefined) return undefined;
    const current = directoryFor(this.ctx).sessionOperator(session.credential, session.operator);
    if (!current) return undefined;
    const epoch = Number((await this.ctx.redis.get(this.ctx.keys.consoleSessionEpoch(current.name))) ?? 0);
    return epoch === session.epoch ? current : undefined;
  }

  /** Ends every console session of `operator`, on every API process at once (their next request is not logged in). */
  async endAll(operator: string): Promise<void> {
    await this.ctx.redis.incr(this.ctx.keys.consoleSessionEpoch(operator));
  }

  async destroy(req: Request, res: Response): Promise<void> {
    const raw = cookies(req)[SESSION_COOKIE];
    const id = raw?.slice(0, raw.lastIndexOf('.'));
    if (id && /^[\w-]{43}$/.test(id)) await this.ctx.redis.del(this.ctx.keys.consoleSession(id));
    res.append('set-cookie', `${SESSION_COOKIE}=; ${cookieFlags(req, 0)}`);
  }

  /** The operator of a request's session: what the API's GET routes and Bull Board accept as a login. */
  reader() {
    return async (req: Request): Promise<Operator | undefined> => (await this.read(req))?.operator;
  }
}
