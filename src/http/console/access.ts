/**
 * Who is asking the console, and the guard every page and form passes: a bearer credential, else the session
 * cookie (session.ts); forms also need the session's CSRF token (a bearer request needs none: a browser never adds
 * one by itself). Pages answer HTML, so refusals are pages too.
 */
import type { NextFunction, Request, Response } from 'express';
import { bearer } from '../auth.js';
import type { OperatorDirectory, Operator } from '../operatorIdentity.js';
import { CONSOLE, errorPage } from './pages.js';
import type { ConsoleSessions } from './session.js';
import { sameSecret } from '../../core/sameSecret.js';

export interface Who {
  operator: Operator;
  csrf?: string;
  viaBearer: boolean;
}

export const html = (res: Response, status: number, body: string) => void res.status(status).type('html').send(body);

/** The operator a guarded route was let through for. */
export const whoOf = (res: Response) => res.locals.who as Who;

/** A refusal page for the operator asking (their name and CSRF token in its header). */
export function refuse(res: Response, status: number, message: string): void {
  const w = res.locals.who as Who | undefined;
  html(res, status, errorPage(status, message, w?.operator, w?.csrf));
}

/** Who is asking: a bearer credential, else the session; undefined = not logged in. */
async function who(dir: OperatorDirectory, sessions: ConsoleSessions, req: Request): Promise<Who | undefined> {
  const token = bearer(req);
  if (token !== undefined) {
    const operator = await dir.authenticate(token);
    return operator ? { operator, viaBearer: true } : undefined;
  }
  const s = await sessions.read(req);
  return s ? { operator: s.operator, csrf: s.csrf, viaBearer: false } : undefined;
}

const NOT_CONFIGURED = 'the console is disabled until OPERATOR_TOKEN, OPERATORS or OIDC_ISSUER is configured';
const STALE_FORM = 'this form is stale or was not sent from the console (CSRF token mismatch): reload the page';

/** Pages: not logged in -> the login page (303). Forms (POST) also need the session's CSRF token. */
export function consoleGuard(dir: OperatorDirectory, sessions: ConsoleSessions) {
  return (kind: 'page' | 'form') => async (req: Request, res: Response, next: NextFunction) => {
    if (!dir.configured) return void html(res, 503, errorPage(503, NOT_CONFIGURED));
    const w = await who(dir, sessions, req);
    if (!w) {
      if (kind === 'page' && bearer(req) === undefined) return void res.redirect(303, `${CONSOLE}/login`);
      return void html(res, 401, errorPage(401, 'log in first'));
    }
    res.locals.who = w;
    const csrf = (req.body as { csrf?: string } | undefined)?.csrf;
    if (kind === 'form' && !w.viaBearer && !sameSecret(csrf, w.csrf)) return void refuse(res, 403, STALE_FORM);
    next();
  };
}

export type Guard = ReturnType<typeof consoleGuard>;
