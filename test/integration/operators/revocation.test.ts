/**
 * Access ends when the credential ends: a console session is checked against the operator directory as it is
 * now on every request (removed operator, changed role, rotated OPERATOR_TOKEN: refused at once, even on an API
 * restarted with the same session secret), all sessions of one operator can be ended, and a JWT must carry
 * exp, a capped lifetime and no iat in the future.
 */
import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportSPKI, generateKeyPair, SignJWT } from 'jose';
import { loadConfig } from '../../../src/config/config.js';
import { createContext } from '../../../src/server/buildContext.js';
import { createFullApi } from '../../../src/http/fullApi.js';
import { createLogger } from '../../../src/metrics/log.js';
import { newMetrics } from '../../../src/metrics/metrics.js';
import type { EngineContext } from '../../../src/runs/engineContext.js';
import type { Harness } from '../../../testkit/harness.js';
import { call, operatorHarness } from './support.js';

const sha = (t: string) => createHash('sha256').update(t).digest('hex');
const ADA = 'ada-token-0123456789';
const BOB = 'bob-token-0123456789';
const SHARED = 'shared-operator-token-1';
const ada = { name: 'ada', tokenSha256: sha(ADA), role: 'operator', tenants: '*' };
const bob = { name: 'bob', tokenSha256: sha(BOB), role: 'operator', tenants: ['acme'] };
const VIC = 'vic-token-0123456789';
const vic = { name: 'vic', tokenSha256: sha(VIC), role: 'viewer', tenants: '*' };
const ISSUER = 'https://id.example.com/';
const AUDIENCE = 'agent-fleet';

let h: Harness & { url: string };
let key: CryptoKey;
const restarted: { ctx: EngineContext; server: Server }[] = [];

beforeAll(async () => {
  const pair = await generateKeyPair('ES256', { extractable: true });
  key = pair.privateKey;
  h = await operatorHarness('revocation', {
    OPERATOR_TOKEN: SHARED,
    OPERATORS: JSON.stringify([ada, bob, vic]),
    CONSOLE_SESSION_SECRET: 's'.repeat(40),
    OIDC_ISSUER: ISSUER,
    OIDC_AUDIENCE: AUDIENCE,
    OIDC_PUBLIC_KEY: await exportSPKI(pair.publicKey),
  });
});
afterAll(async () => {
  for (const r of restarted) {
    r.server.close();
    await r.ctx.close();
  }
  await h.close();
});

/** The same API restarted with other operator settings (same Redis, same session secret). */
async function restart(env: Record<string, string>): Promise<string> {
  const cfg = loadConfig({ ...h.env, ...env });
  const ctx = await createContext(cfg, 'revocation-restarted', {
    log: createLogger('revocation', 'silent'),
    metrics: newMetrics(),
  });
  const app = createFullApi(ctx, () => true);
  const server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  restarted.push({ ctx, server });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const cookieOf = (res: Response, name: string) =>
  res.headers
    .getSetCookie()
    .find((c) => c.startsWith(`${name}=`))
    ?.split(';')[0] ?? '';

async function login(url: string, token: string): Promise<string> {
  const form = await fetch(`${url}/console/login`);
  const csrfCookie = cookieOf(form, 'console_login_csrf');
  const res = await fetch(`${url}/console/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: csrfCookie },
    body: new URLSearchParams({ token, csrf: csrfCookie.split('=')[1]! }).toString(),
  });
  expect(res.status).toBe(303);
  return cookieOf(res, 'console_session');
}

const listWith = async (url: string, cookie: string) => (await fetch(`${url}/v1/runs`, { headers: { cookie } })).status;

describe('console sessions follow the operator directory', () => {
  it('a removed operator, a changed role or tenants, and a rotated OPERATOR_TOKEN end the session at once', async () => {
    const bobSession = await login(h.url, BOB);
    const sharedSession = await login(h.url, SHARED);
    expect(await listWith(h.url, bobSession)).toBe(200);
    expect(await listWith(h.url, sharedSession)).toBe(200);
    const same = await restart({});
    expect(await listWith(same, bobSession)).toBe(200);
    const downgraded = await restart({ OPERATORS: JSON.stringify([ada, { ...bob, role: 'viewer' }]) });
    expect(await listWith(downgraded, bobSession)).toBe(401);
    expect(await listWith(h.url, bobSession)).toBe(401);
    const bobAgain = await login(h.url, BOB);
    const widened = await restart({ OPERATORS: JSON.stringify([ada, { ...bob, tenants: ['acme', 'globex'] }]) });
    expect(await listWith(widened, bobAgain)).toBe(401);
    const bobThird = await login(h.url, BOB);
    const removed = await restart({ OPERATORS: JSON.stringify([ada]) });
    expect(await listWith(removed, bobThird)).toBe(401);
    const rotated = await restart({ OPERATOR_TOKEN: 'rotated-operator-token-2' });
    expect(await listWith(rotated, sharedSession)).toBe(401);
    const cancel = await fetch(`${rotated}/console/runs`, { headers: { cookie: sharedSession }, redirect: 'manual' });
    expect(cancel.status).toBe(303);
  });

  it('POST /v1/operators/:name/sessions/end ends every session of that operator; a scoped operator may end only its own', async () => {
    const first = await login(h.url, BOB);
    const second = await login(h.url, BOB);
    const adaSession = await login(h.url, ADA);
    expect(await call(h.url, 'POST', '/v1/operators/ada/sessions/end', {}, BOB)).toMatchObject({ status: 403 });
    expect(await listWith(h.url, adaSession)).toBe(200);
    expect(await call(h.url, 'POST', '/v1/operators/bob/sessions/end', {}, ADA)).toMatchObject({
      status: 200,
      body: { sessionsEnded: true },
    });
    expect(await listWith(h.url, first)).toBe(401);
    expect(await listWith(h.url, second)).toBe(401);
    expect(await listWith(h.url, adaSession)).toBe(200);
    expect(await listWith(h.url, await login(h.url, BOB))).toBe(200);
  });

  it('a viewer may end its own sessions (anyone may), never another operator’s, even seeing every tenant', async () => {
    const vicSession = await login(h.url, VIC);
    const adaSession = await login(h.url, ADA);
    expect(await call(h.url, 'POST', '/v1/operators/ada/sessions/end', {}, VIC)).toMatchObject({ status: 403 });
    expect(await listWith(h.url, adaSession)).toBe(200);
    expect(await call(h.url, 'POST', '/v1/operators/vic/sessions/end', {}, VIC)).toMatchObject({
      status: 200,
      body: { operator: 'vic', sessionsEnded: true },
    });
    expect(await listWith(h.url, vicSession)).toBe(401);
    expect(await listWith(h.url, adaSession)).toBe(200);
  });
});

describe('OIDC bearer lifetime', () => {
  const now = () => Math.floor(Date.now() / 1000);
  const jwt = (claims: Record<string, unknown>) =>
    new SignJWT({ email: 'oli@example.com', role: 'viewer', tenants: '*', ...claims })
      .setProtectedHeader({ alg: 'ES256' })
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .sign(key);

  it('refuses a JWT without exp, with iat in the future, or living longer than a day; allows a minute of skew', async () => {
    const status = async (token: string) => (await call(h.url, 'GET', '/v1/approvals', undefined, token)).status;
    expect(await status(await jwt({ iat: now(), exp: now() + 600 }))).toBe(200);
    expect(await status(await jwt({ iat: now() }))).toBe(401);
    expect(await status(await jwt({ iat: now() + 365 * 86400, exp: now() + 365 * 86400 + 600 }))).toBe(401);
    expect(await status(await jwt({ iat: now(), exp: now() + 30 * 86400 }))).toBe(401);
    expect(await status(await jwt({ exp: now() + 30 * 86400 }))).toBe(401);
    expect(await status(await jwt({ iat: now() - 600, exp: now() - 30 }))).toBe(200);
    expect(await status(await jwt({ iat: now() + 30, exp: now() + 600 }))).toBe(200);
    expect(await status(await jwt({ iat: now() - 600, exp: now() - 120 }))).toBe(401);
  });
});
