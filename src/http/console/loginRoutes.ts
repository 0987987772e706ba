/** Console login and logout: the operator's token or JWT in a form -> a session cookie (session.ts). */
import { randomBytes } from 'node:crypto';
import type { Request, Response, Router } from 'express';
import type { EngineContext } from '../../runs/engineContext.js';
import type { OperatorDirectory } from '../operatorIdentity.js';
import { html, type Guard } from './access.js';
import { CONSOLE, errorPage, loginPage } from './pages.js';
import { cookieFlags, cookies, LOGIN_CSRF_COOKIE, type ConsoleSessions } from './session.js';
import { sameSecret } from '../../core/sameSecret.js';

const LOGIN_DISABLED =
  'console login is disabled until CONSOLE_SESSION_SECRET is configured (production); a bearer header still works';
/** The login form's CSRF cookie lives ten minutes. */
const LOGIN_FORM_MS = 600_000;

/** A new login form's CSRF token, its cookie set on the answer. */
function freshLoginCsrf(req: Request, res: Response): string {
  const csrf = randomBytes(24).toString('base64url');
  res.append('set-cookie', `${LOGIN_CSRF_COOKIE}=${csrf}; ${cookieFlags(req, LOGIN_FORM_MS)}`);
  return csrf;
}

export function mountLogin(
  r: Router,
  ctx: EngineContext,
  dir: OperatorDirectory,
  sessions: ConsoleSessions,
  guard: Guard,
): void {
  r.get(`${CONSOLE}/login`, (req, res) => html(res, 200, loginPage(freshLoginCsrf(req, res))));

  r.post(`${CONSOLE}/login`, async (req, res) => {
    const body = (req.body ?? {}) as { token?: unknown; csrf?: unknown };
    if (!sessions.enabled) return void html(res, 503, errorPage(503, LOGIN_DISABLED));
    if (typeof body.csrf !== 'string' || !sameSecret(body.csrf, cookies(req)[LOGIN_CSRF_COOKIE]))
      return void html(res, 403, loginPage(freshLoginCsrf(req, res), 'the login form expired: try again'));
    const token = typeof body.token === 'string' && body.token.length <= 8192 ? body.token : undefined;
    const operator = token === undefined ? undefined : await dir.authenticate(token);
    if (!operator || token === undefined)
      return void html(res, 401, loginPage(freshLoginCsrf(req, res), 'that token is not valid'));
    await sessions.create(req, res, operator, token);
    res.append('set-cookie', `${LOGIN_CSRF_COOKIE}=; ${cookieFlags(req, 0)}`);
    const fields = { code: 'console_login', operator: operator.name, role: operator.role };
    ctx.log.info(fields, 'operator logged in to the console');
    res.redirect(303, `${CONSOLE}/runs`);
  });

  r.post(`${CONSOLE}/logout`, guard('form'), async (req, res) => {
    await sessions.destroy(req, res);
    res.redirect(303, `${CONSOLE}/login`);
  });
}
