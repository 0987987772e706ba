/**
 * Bearer-token checks with a constant-time compare. Secure by default: a route
 * whose credential is not configured answers 503 naming the setting, never
 * open (development gets tokens from DEV_AUTH=generate, see src/config/config.ts).
 *
 * Who may touch runs:
 *  - the producer token: every run; an operator (src/http/operatorIdentity.ts:
 *    OPERATOR_TOKEN, OPERATORS, an OIDC JWT, or the console's session on the
 *    routes that take it): the runs of its tenants (every run for `*`);
 *  - a tenant token (TENANT_TOKENS {"tenant": "token"}): only that tenant's
 *    runs (create, view, events). Another tenant's run answers 404, exactly as
 *    an unknown run does, so a tenant cannot even learn that it exists.
 */
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { Config } from '../config/config.js';
import type { RedisClient } from '../store/connect.js';
import { isRunId, type KeySpace } from '../store/keys.js';
import { directoryFor, type DirectoryDeps, type Operator, type OperatorRole } from './operatorIdentity.js';
import { actorSeesTenant, runTenant } from '../operations/actor.js';
import type { RunArchive } from '../runs/engineContext.js';
import { matchesDigest, secretDigest } from '../core/sameSecret.js';

/**
 * Digests of the configured credentials, each computed once: every request is checked against them, and hashing the
 * same configured token again per request was a third of the check's CPU. `expected` is always a configured setting,
 * so this holds a handful of entries.
 */
const expectedDigests = new Map<string, Buffer>();

export function tokenMatches(given: string | undefined, expected: string): boolean {
  if (given === undefined) return false;
  let b = expectedDigests.get(expected);
  if (b === undefined) {
    b = secretDigest(expected);
    expectedDigests.set(expected, b);
  }
  return matchesDigest(given, b);
}

export function bearer(req: Request): string | undefined {
  const h = req.headers.authorization;
  return h?.startsWith('Bearer ') ? h.slice(7) : undefined;
}

/** 503: the route's credential is not configured. The body names the setting(s) to set. */
export function authUnconfigured(res: Response, settings: string): void {
  res.status(503).json({
    error: 'auth_not_configured',
    message: `this route is disabled until ${settings} is configured (in development, DEV_AUTH=generate creates tokens)`,
  });
}

/** The one 404 of a run: malformed, another tenant's and unknown ids all get exactly this body. */
export function runNotFound(res: Response): void {
  res.status(404).json({ error: 'not_found', message: 'no such run' });
}

/** The one 404 of an action id (approvals, reconciliations): malformed and unknown alike. */
export function actionNotFound(res: Response): void {
  res.status(404).json({ error: 'not_found', message: 'no such action' });
}

/** Who a request speaks for: the producer, one tenant, or a named operator (src/http/operatorIdentity.ts). */
export type Principal =
  { role: 'producer' } | { role: 'tenant'; tenant: string } | { role: 'operator'; operator: Operator };

type TokenConfig = Pick<Config, 'PRODUCER_TOKEN' | 'TENANT_TOKENS'>;
type AuthConfig = DirectoryDeps['cfg'] & TokenConfig;
/** The settings, and the metrics and log the operator directory reports refused bearers to (an EngineContext). */
export type AuthDeps = Omit<DirectoryDeps, 'cfg'> & { cfg: AuthConfig };

export const RUN_TOKEN_SETTINGS = 'PRODUCER_TOKEN, OPERATOR_TOKEN, OPERATORS, OIDC_ISSUER or TENANT_TOKENS';
export const OPERATOR_SETTINGS = 'OPERATOR_TOKEN, OPERATORS or OIDC_ISSUER';

/** Whether any token that may read runs is configured. */
export function runTokensConfigured(deps: AuthDeps): boolean {
  const { cfg } = deps;
  return directoryFor(deps).configured || cfg.PRODUCER_TOKEN !== undefined || Object.keys(cfg.TENANT_TOKENS).length > 0;
}

/**
 * The producer or tenant a bearer token names, or undefined when it matches
 * none. Every configured token is compared (constant time each), so timing
 * does not tell which one nearly matched. Operators: see principalFor.
 */
export function principalOf(cfg: TokenConfig, token: string | undefined): Principal | undefined {
  const tenants = Object.entries(cfg.TENANT_TOKENS);
  let found: Principal | undefined;
  if (cfg.PRODUCER_TOKEN !== undefined && tokenMatches(token, cfg.PRODUCER_TOKEN)) found = { role: 'producer' };
  for (const [tenant, secret] of tenants) {
    if (tokenMatches(token, secret)) found ??= { role: 'tenant', tenant };
  }
  return found;
}

/**
 * Whether a refusal may tell this bearer how the deployment is configured (its agents, its providers' settings, the
 * settings behind a limit): the producer's to see, never a tenant's (InvalidRunRequest.fieldsFor).
 */
export function seesDeployment(cfg: TokenConfig, token: string | undefined): boolean {
  return principalOf(cfg, token)?.role === 'producer';
}

/**
 * The principal of a request: an operator (bearer token, JWT, or, where
 * `session` is given, the console's session cookie), else the producer or a
 * tenant by bearer token.
 */
export async function principalFor(
  deps: AuthDeps,
  req: Request,
  session?: SessionReader,
): Promise<Principal | undefined> {
  const token = bearer(req);
  const operator = token !== undefined ? await directoryFor(deps).authenticate(token) : await session?.(req);
  if (operator) return { role: 'operator', operator };
  return principalOf(deps.cfg, token);
}

/** Reads the console session of a request, if any (src/http/console/session.ts). */
export type SessionReader = (req: Request) => Promise<Operator | undefined>;

/** Whether a principal may see runs of `tenant`. */
export function principalSees(p: Principal, tenant: string | null | undefined): boolean {
  if (p.role === 'producer') return true;
  if (p.role === 'tenant') return tenant === p.tenant;
  return actorSeesTenant(p.operator, tenant);
}

/** The tenant a producer-or-tenant principal is limited to, if any. */
export function tenantScope(p: Principal): string | undefined {
  return p.role === 'tenant' ? p.tenant : undefined;
}

/**
 * POST /v1/runs: the producer token, or a tenant token for a body naming that
 * tenant (403 for another tenant). 503 while neither a producer token nor a
 * tenant token is configured. Runs after the JSON body parser.
 */
export function requireRunCreation(cfg: TokenConfig) {
  const configured = cfg.PRODUCER_TOKEN !== undefined || Object.keys(cfg.TENANT_TOKENS).length > 0;
  return (req: Request, res: Response, next: NextFunction) => {
    if (!configured) return void authUnconfigured(res, 'PRODUCER_TOKEN or TENANT_TOKENS');
    const p = principalOf(cfg, bearer(req));
    if (!p)
      return void res.status(401).json({ error: 'unauthorized', message: 'a producer or tenant token is required' });
    const scope = tenantScope(p);
    const asked = (req.body as { tenant?: unknown } | undefined)?.tenant;
    if (scope !== undefined && asked !== scope) {
      return void res
        .status(403)
        .json({ error: 'forbidden', message: 'a tenant token creates runs of its own tenant only' });
    }
    next();
  };
}

/**
 * GET /v1/runs/:id and everything under it that shows a run: any run token;
 * a tenant token only for that tenant's runs. The id's format is checked
 * before any Redis access: a malformed id (`<id>:journal`, `<id>}`), another
 * tenant's run and an unknown run all answer the same 404 (runNotFound).
 */
export function requireRunAccess(
  deps: AuthDeps & { redis: RedisClient; keys: KeySpace; archive?: Pick<RunArchive, 'tenantOf'> },
  session?: SessionReader,
): RequestHandler<{ id: string }> {
  return async (req, res, next) => {
    if (!runTokensConfigured(deps)) return void authUnconfigured(res, RUN_TOKEN_SETTINGS);
    const p = await principalFor(deps, req, session);
    if (!p)
      return void res
        .status(401)
        .json({ error: 'unauthorized', message: 'an operator, producer or tenant token is required' });
    const runId = req.params.id;
    if (!isRunId(runId)) return void runNotFound(res);
    res.locals.principal = p;
    if (p.role === 'producer' || (p.role === 'operator' && p.operator.tenants === '*')) return void next();
    // A run past Redis's retention is read from the archive (its tenant too).
    if (!principalSees(p, (await runTenant(deps, runId)) ?? null)) return void runNotFound(res);
    next();
  };
}

/**
 * Operator routes: an operator credential (bearer; the console's session where
 * `session` is given, see src/http/console). 503 naming the settings while
 * none is configured, 401 without a valid one, 403 for a viewer on a route
 * that acts (`need` operator). The operator is left in res.locals.operator.
 */
export function requireOperator(deps: AuthDeps, need: OperatorRole, session?: SessionReader): RequestHandler {
  const dir = directoryFor(deps);
  return async (req, res, next) => {
    if (!dir.configured) return void authUnconfigured(res, OPERATOR_SETTINGS);
    const token = bearer(req);
    const operator = token !== undefined ? await dir.authenticate(token) : await session?.(req);
    if (!operator)
      return void res.status(401).json({ error: 'unauthorized', message: 'an operator token is required' });
    if (need === 'operator' && operator.role !== 'operator') {
      return void res
        .status(403)
        .json({ error: 'forbidden', message: `operator ${operator.name} has the viewer role: it may look, not act` });
    }
    res.locals.operator = operator;
    next();
  };
}

/** The operator requireOperator authenticated. */
export function operatorOf(res: Response): Operator {
  const op = res.locals.operator as Operator | undefined;
  if (!op) throw new Error('operatorOf: requireOperator did not run on this route');
  return op;
}
