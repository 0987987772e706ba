/**
 * Who is acting: per-operator tokens (OPERATORS), OIDC/JWT bearers (a static
 * public key and a JWKS URL), roles and tenant scopes, against real Redis,
 * real workers and the real API. Every action records the authenticated
 * operator, never the name in the request body.
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportJWK, exportSPKI, generateKeyPair, SignJWT } from 'jose';
import { Ledger } from '../../../src/ledger/ledger.js';
import { loadConfig } from '../../../src/config/config.js';
import { createLogger } from '../../../src/metrics/log.js';
import { newMetrics, type Metrics } from '../../../src/metrics/metrics.js';
import { createContext } from '../../../src/server/buildContext.js';
import { createFullApi } from '../../../src/http/fullApi.js';
import { directoryFor } from '../../../src/http/operatorIdentity.js';
import type { Harness } from '../../../testkit/harness.js';
import { call, final, operatorHarness, refund, startScripted, turn } from './support.js';

const sha = (t: string) => createHash('sha256').update(t).digest('hex');
const ADA = 'ada-token-0123456789';
const VIC = 'vic-token-0123456789';
const TOM = 'tom-token-0123456789';
const OPERATORS = [
  { name: 'ada', tokenSha256: sha(ADA), role: 'operator', tenants: '*' },
  { name: 'vic', tokenSha256: sha(VIC), role: 'viewer', tenants: '*' },
  { name: 'tom', tokenSha256: sha(TOM), role: 'operator', tenants: ['globex'] },
];
const ISSUER = 'https://id.example.com/';
const AUDIENCE = 'agent-fleet';

let h: Harness & { url: string };
let ledger: Ledger;
let sign: (
  claims: Record<string, unknown>,
  opts?: { audience?: string; expiresIn?: string | number },
) => Promise<string>;

/** agent_operator_auth_failures_total{method="oidc", reason} as a registry has it now. */
async function oidcFailures(metrics: Metrics, reason: string): Promise<number> {
  const { values } = await metrics.operatorAuthFailures.get();
  return values.find((v) => v.labels.method === 'oidc' && v.labels.reason === reason)?.value ?? 0;
}

beforeAll(async () => {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  sign = (claims, opts = {}) =>
    new SignJWT(claims)
      .setProtectedHeader({ alg: 'ES256' })
      .setIssuer(ISSUER)
      .setAudience(opts.audience ?? AUDIENCE)
      .setIssuedAt()
      .setExpirationTime(opts.expiresIn ?? '10m')
      .sign(privateKey);
  h = await operatorHarness('identity', {
    OPERATORS: JSON.stringify(OPERATORS),
    OIDC_ISSUER: ISSUER,
    OIDC_AUDIENCE: AUDIENCE,
    OIDC_PUBLIC_KEY: await exportSPKI(publicKey),
  });
  ledger = new Ledger(h.ctx.redis, h.ctx.keys);
});
afterAll(async () => {
  await h.close();
});

async function pending(runId: string, token: string): Promise<{ actionId: string; fingerprint: string }> {
  await h.waitForStatus(runId, ['waiting_approval']);
  const list = await call<{ approvals: { actionId: string; runId: string; fingerprint: string }[] }>(
    h.url,
    'GET',
    '/v1/approvals',
    undefined,
    token,
  );
  expect(list.status).toBe(200);
  return list.body.approvals.find((a) => a.runId === runId)!;
}

describe('per-operator credentials (OPERATORS)', () => {
  it('an approval records the authenticated operator in the ledger history and the journal, not the typed name', async () => {
    const runId = await startScripted(h, [turn([refund(20_000)]), final], 'ID');
    const p = await pending(runId, ADA);
    const res = await call(
      h.url,
      'POST',
      `/v1/approvals/${p.actionId}`,
      { decision: 'approve', fingerprint: p.fingerprint, approver: 'mallory' },
      ADA,
    );
    expect(res.status).toBe(200);
    expect(res.body.approver).toBe('ada');
    expect(await h.waitForStatus(runId, ['completed', 'failed'])).toBe('completed');
    const history = await ledger.history(runId, p.actionId);
    expect(history.find((x) => x.to === 'authorized')?.by).toBe('ada');
    expect(JSON.stringify(history)).not.toContain('mallory');
    const journal = await h.ctx.store.transcript(runId);
    expect(journal.filter((e) => e.kind === 'operator')).toEqual([
      expect.objectContaining({
        kind: 'operator',
        action: 'approve',
        by: 'ada',
        actionId: p.actionId,
        detail: 'authorized',
      }),
    ]);
  });

  it('a viewer sees runs and approvals but every action is 403 and changes nothing', async () => {
    const runId = await startScripted(h, [turn([refund(20_000)]), final], 'ID');
    const p = await pending(runId, VIC);
    expect((await call(h.url, 'GET', `/v1/runs/${runId}`, undefined, VIC)).status).toBe(200);
    const refused = await call(
      h.url,
      'POST',
      `/v1/approvals/${p.actionId}`,
      { decision: 'approve', fingerprint: p.fingerprint },
      VIC,
    );
    expect(refused).toMatchObject({ status: 403, body: { error: 'forbidden' } });
    expect((await call(h.url, 'POST', `/v1/runs/${runId}/cancel`, {}, VIC)).status).toBe(403);
    expect(
      (await call(h.url, 'POST', `/v1/reconciliations/${p.actionId}`, { finding: 'not_sent', evidence: {} }, VIC))
        .status,
    ).toBe(403);
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')).toBe('waiting_approval');
    expect((await ledger.get(runId, p.actionId))?.state).toBe('planned');
    // The run's own operator ends it, and the reason names who.
    const cancel = await call(h.url, 'POST', `/v1/runs/${runId}/cancel`, {}, ADA);
    expect(cancel).toMatchObject({ status: 200, body: { cancelled: 'now', operator: 'ada' } });
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'reason')).toBe('cancelled_by_operator: requested by ada');
    expect((await h.ctx.store.transcript(runId)).filter((e) => e.kind === 'operator')).toEqual([
      expect.objectContaining({ action: 'cancel', by: 'ada' }),
    ]);
  });

  it("a tenant-scoped operator gets 404 for another tenant's run and action, and lists without them", async () => {
    const runId = await startScripted(h, [turn([refund(20_000)]), final], 'ID'); // tenant acme
    const p = await pending(runId, ADA);
    expect((await call(h.url, 'GET', `/v1/runs/${runId}`, undefined, TOM)).status).toBe(404);
    expect((await call(h.url, 'GET', `/v1/runs/${runId}/events`, undefined, TOM)).status).toBe(404);
    const list = await call<{ approvals: { runId: string }[] }>(h.url, 'GET', '/v1/approvals', undefined, TOM);
    expect(list.status).toBe(200);
    expect(list.body.approvals.map((a) => a.runId)).not.toContain(runId);
    const decide = await call(
      h.url,
      'POST',
      `/v1/approvals/${p.actionId}`,
      { decision: 'approve', fingerprint: p.fingerprint },
      TOM,
    );
    expect(decide).toMatchObject({ status: 404, body: { error: 'not_found' } });
    expect((await call(h.url, 'POST', `/v1/runs/${runId}/cancel`, {}, TOM)).status).toBe(404);
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')).toBe('waiting_approval');
    await call(h.url, 'POST', `/v1/runs/${runId}/cancel`, {}, ADA);
  });

  it('an unknown token is 401', async () => {
    expect((await call(h.url, 'GET', '/v1/approvals', undefined, 'not-a-configured-token')).status).toBe(401);
  });
});

describe('OIDC / JWT bearer', () => {
  it('a verified JWT acts under its name claim; a viewer role is 403; bad audience, expiry, signature or no role are 401', async () => {
    const runId = await startScripted(h, [turn([refund(20_000)]), final], 'JWT');
    const p = await pending(runId, ADA);
    const viewer = await sign({ email: 'val@example.com', role: 'viewer', tenants: '*' });
    expect((await call(h.url, 'GET', '/v1/approvals', undefined, viewer)).status).toBe(200);
    expect(
      (
        await call(
          h.url,
          'POST',
          `/v1/approvals/${p.actionId}`,
          { decision: 'approve', fingerprint: p.fingerprint },
          viewer,
        )
      ).status,
    ).toBe(403);
    const reasons = ['wrong_audience', 'expired', 'no_role', 'bad_signature'];
    const before = await Promise.all(reasons.map((r) => oidcFailures(h.ctx.metrics, r)));
    for (const bad of [
      await sign({ email: 'x@example.com', role: 'operator', tenants: '*' }, { audience: 'someone-else' }),
      await sign(
        { email: 'x@example.com', role: 'operator', tenants: '*' },
        { expiresIn: Math.floor(Date.now() / 1000) - 60 },
      ),
      await sign({ email: 'x@example.com', tenants: '*' }),
      (await sign({ email: 'x@example.com', role: 'operator', tenants: '*' })).replace(/.{4}$/, 'AAAA'),
    ]) {
      expect((await call(h.url, 'GET', '/v1/approvals', undefined, bad)).status).toBe(401);
    }
    // Each refusal is counted under its own reason (against the configured public key).
    const after = await Promise.all(reasons.map((r) => oidcFailures(h.ctx.metrics, r)));
    expect(after.map((n, i) => n - before[i]!)).toEqual([1, 1, 1, 1]);
    const scoped = await sign({ email: 'gil@example.com', role: ['operator'], tenants: ['globex'] });
    expect(
      (
        await call(
          h.url,
          'POST',
          `/v1/approvals/${p.actionId}`,
          { decision: 'approve', fingerprint: p.fingerprint },
          scoped,
        )
      ).status,
    ).toBe(404);
    const op = await sign({ email: 'oli@example.com', role: ['operator'], tenants: ['acme'] });
    const ok = await call(
      h.url,
      'POST',
      `/v1/approvals/${p.actionId}`,
      { decision: 'reject', fingerprint: p.fingerprint },
      op,
    );
    expect(ok).toMatchObject({ status: 200, body: { approver: 'oli@example.com', state: 'rejected' } });
    expect((await ledger.history(runId, p.actionId)).find((x) => x.to === 'rejected')?.by).toBe('oli@example.com');
  });

  it('verifies against the issuer JWKS URL as well', async () => {
    const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
    const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
    const server: Server = createServer(
      (_req, res) =>
        void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] })),
    );
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const port = (server.address() as { port: number }).port;
      const cfg = loadConfig({
        OIDC_ISSUER: ISSUER,
        OIDC_AUDIENCE: AUDIENCE,
        OIDC_JWKS_URL: `http://127.0.0.1:${port}/jwks`,
      });
      const deps = { cfg, metrics: newMetrics(), log: createLogger('identity-jwks', 'silent') };
      const token = await new SignJWT({ email: 'jo@example.com', role: 'operator', tenants: ['acme', 'globex'] })
        .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
        .setIssuer(ISSUER)
        .setAudience(AUDIENCE)
        .setExpirationTime('5m')
        .sign(privateKey);
      expect(await directoryFor(deps).authenticate(token)).toMatchObject({
        name: 'jo@example.com',
        role: 'operator',
        tenants: ['acme', 'globex'],
      });
      expect(await directoryFor(deps).authenticate(token.slice(0, -4) + 'AAAA')).toBeUndefined();
      expect(await oidcFailures(deps.metrics, 'bad_signature')).toBe(1);
    } finally {
      server.close();
    }
  });

  it('a JWKS endpoint stopped, answering 500 or garbage, or without the key is 401, counted and logged as oidc_unavailable; a refused token as oidc_token_refused; neither logs the token', async () => {
    const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
    const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
    let answer: (res: ServerResponse) => void = () => {};
    const handler = (_req: IncomingMessage, res: ServerResponse) => answer(res);
    let jwks: Server = createServer(handler);
    await new Promise<void>((r) => jwks.listen(0, '127.0.0.1', r));
    const port = (jwks.address() as AddressInfo).port;
    const listen = async () => {
      jwks = createServer(handler);
      await new Promise<void>((r) => jwks.listen(port, '127.0.0.1', r));
    };
    const stop = () => new Promise<void>((r) => jwks.close(() => r()));
    await stop(); // the identity provider is down from the start: nothing cached

    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const env: Record<string, string> = { ...h.env, OIDC_JWKS_URL: `http://127.0.0.1:${port}/jwks` };
    delete env.OIDC_PUBLIC_KEY;
    const ctx = await createContext(loadConfig(env), 'identity-oidc-failures', {
      log: createLogger('identity-oidc-failures', 'debug', sink),
      metrics: newMetrics(),
    });
    const server = await new Promise<Server>((resolve) => {
      const s = createFullApi(ctx, () => true).listen(0, '127.0.0.1', () => resolve(s));
    });
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const jwt = (claims: Record<string, unknown>, opts: { kid?: string; audience?: string } = {}) =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: 'RS256', kid: opts.kid ?? 'k1' })
        .setIssuer(ISSUER)
        .setAudience(opts.audience ?? AUDIENCE)
        .setIssuedAt()
        .setExpirationTime('5m')
        .sign(privateKey);
    const claims = { email: 'jo@example.com', role: 'operator', tenants: '*' };
    const good = await jwt(claims);
    const logged = () =>
      lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => String(l.code).startsWith('oidc_'));
    const status = async (token: string) => (await call(url, 'GET', '/v1/approvals', undefined, token)).status;
    try {
      // Stopped: connection refused.
      expect(await status(good)).toBe(401);
      expect(await oidcFailures(ctx.metrics, 'idp_unreachable')).toBe(1);
      expect(logged().at(-1)).toMatchObject({
        level: 40,
        code: 'oidc_unavailable',
        method: 'oidc',
        reason: 'idp_unreachable',
        jwksHost: `127.0.0.1:${port}`,
        err: expect.objectContaining({ message: expect.any(String) }),
      });

      await listen();
      answer = (res) => void res.writeHead(500).end('upstream trouble');
      expect(await status(good)).toBe(401);
      expect(await oidcFailures(ctx.metrics, 'idp_unreachable')).toBe(2);

      answer = (res) => void res.writeHead(200, { 'content-type': 'text/html' }).end('<html>sign in</html>');
      expect(await status(good)).toBe(401);
      expect(await oidcFailures(ctx.metrics, 'jwks_invalid')).toBe(1);
      expect(logged().at(-1)).toMatchObject({ level: 40, code: 'oidc_unavailable', reason: 'jwks_invalid' });

      // The provider back: the same token is an operator again.
      answer = (res) =>
        void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] }));
      expect(await status(good)).toBe(200);

      // A kid the key set does not hold (a rotation the provider did not publish).
      expect(await status(await jwt(claims, { kid: 'k2' }))).toBe(401);
      expect(await oidcFailures(ctx.metrics, 'no_matching_key')).toBe(1);
      expect(logged().at(-1)).toMatchObject({ code: 'oidc_unavailable', reason: 'no_matching_key', kid: 'k2' });

      // A token refused: the same 401, at info, with its reason and the failed claim's name only.
      const otherAudience = await jwt(claims, { audience: 'someone-else' });
      const refused = await call(url, 'GET', '/v1/approvals', undefined, otherAudience);
      const unknown = await call(url, 'GET', '/v1/approvals', undefined, 'not-a-configured-token');
      expect(refused).toEqual(unknown); // the caller is not told why
      expect(refused.status).toBe(401);
      expect(await oidcFailures(ctx.metrics, 'wrong_audience')).toBe(1);
      expect(logged().at(-1)).toEqual({
        level: 30,
        time: expect.any(Number),
        name: 'identity-oidc-failures',
        service: 'identity-oidc-failures',
        code: 'oidc_token_refused',
        method: 'oidc',
        reason: 'wrong_audience',
        errorType: 'JWTClaimValidationFailed',
        claim: 'aud',
        msg: expect.any(String),
      });
      expect(await oidcFailures(ctx.metrics, 'idp_unreachable')).toBe(2);

      // Nothing of a token (its parts) nor of its claims is in any line written.
      const text = lines.join('');
      for (const token of [good, otherAudience]) for (const part of token.split('.')) expect(text).not.toContain(part);
      expect(text).not.toContain('jo@example.com');
    } finally {
      server.close();
      await stop();
      await ctx.close();
    }
  });

  it('configuration: OIDC needs an audience and one key source; operator names are unique', () => {
    expect(() => loadConfig({ OIDC_ISSUER: ISSUER })).toThrow(/OIDC_AUDIENCE/);
    expect(() => loadConfig({ OPERATORS: JSON.stringify([OPERATORS[0], OPERATORS[0]]) })).toThrow(/used twice/);
    expect(() => loadConfig({ OPERATORS: JSON.stringify([{ ...OPERATORS[0], tokenSha256: ADA }]) })).toThrow(
      /tokenSha256/,
    );
  });
});
