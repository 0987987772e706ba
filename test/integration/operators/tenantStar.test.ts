/**
 * "*" names every tenant only on its own (`"tenants": "*"`): inside a tenant list it is the name of the search index
 * every tenant's runs are in (SEARCH_ANY_TENANT), so a scoped reader holding it searched every tenant's runs. The
 * configuration refuses it in OPERATORS' tenant lists and as a TENANT_TOKENS or WEBHOOK_SECRETS key, an OIDC token
 * whose tenants claim lists it is refused (401, `claim_invalid` naming the claim), and the search keeps a scoped
 * reader to its tenants' runs whatever index it reads (a console session opened before this check: it still holds one).
 */
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportSPKI, generateKeyPair, SignJWT } from 'jose';
import { buildSpec } from '../../../src/producer/intake.js';
import { loadConfig } from '../../../src/config/config.js';
import { ConfigError } from '../../../src/core/errors.js';
import { sampleTicket, type Harness } from '../../../testkit/harness.js';
import { final, OPERATOR_TOKEN, operatorHarness } from './support.js';

const ISSUER = 'https://id.example.com/';
const AUDIENCE = 'agent-fleet';
const SESSION_SECRET = 's'.repeat(32);
const sha = (t: string) => createHash('sha256').update(t).digest('hex');

let h: Harness & { url: string };
let sign: (claims: Record<string, unknown>) => Promise<string>;
const tag = `star-${Date.now()}`;
const customer = `ada-${tag}@example.com`;
const runs: Record<string, string> = {};

beforeAll(async () => {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  sign = (claims) =>
    new SignJWT(claims)
      .setProtectedHeader({ alg: 'ES256' })
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setIssuedAt()
      .setExpirationTime('10m')
      .sign(privateKey);
  h = await operatorHarness('tenantStar', {
    OIDC_ISSUER: ISSUER,
    OIDC_AUDIENCE: AUDIENCE,
    OIDC_PUBLIC_KEY: await exportSPKI(publicKey),
    CONSOLE_SESSION_SECRET: SESSION_SECRET,
  });
  for (const tenant of ['acme', 'globex']) {
    const spec = buildSpec(
      h.ctx,
      {
        tenant,
        ticket: { ...sampleTicket(`${tenant}-${tag}`), customer: { email: customer, name: 'Ada' } },
        agent: { model: 'scripted', script: [final] },
      },
      Date.now(),
    );
    expect(await h.ctx.store.create(spec, Date.now())).toBe(true);
    runs[tenant] = spec.runId;
    await h.waitForStatus(spec.runId, ['completed']);
  }
}, 60_000);
afterAll(async () => {
  await h.close();
});

/** The run ids `GET /v1/runs?<query>` answers, with the request's credential headers. */
async function searched(query: string, headers: Record<string, string>): Promise<{ status: number; ids: string[] }> {
  const res = await fetch(`${h.url}/v1/runs?${query}`, { headers });
  const body = res.status === 200 ? ((await res.json()) as { runs: { runId: string }[] }) : { runs: [] };
  return { status: res.status, ids: body.runs.map((r) => r.runId).sort() };
}

const byCustomer = `customer=${encodeURIComponent(customer)}`;
const bySubject = (tenant: string) => `subject=${tenant}-${tag}`;

function refusal(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return e as ConfigError;
  }
  throw new Error(`accepted: ${JSON.stringify(env)}`);
}

describe('"*" inside a tenant list', () => {
  it("the configuration refuses it in an operator's tenant list and as a tenant token's or webhook secret's tenant", () => {
    const operator = (tenants: unknown) =>
      JSON.stringify([{ name: 'eve', tokenSha256: sha('eve-token-0123456789'), role: 'viewer', tenants }]);
    for (const [env, field] of [
      [{ OPERATORS: operator(['*']) }, 'OPERATORS'],
      [{ OPERATORS: operator(['acme', '*']) }, 'OPERATORS'],
      [{ TENANT_TOKENS: JSON.stringify({ '*': 'star-tenant-token' }) }, 'TENANT_TOKENS'],
      [{ TENANT_TOKENS: JSON.stringify({ 'acme corp': 'spaced-tenant-token' }) }, 'TENANT_TOKENS'],
      [{ WEBHOOK_SECRETS: JSON.stringify({ '*': 'star-webhook-secret' }) }, 'WEBHOOK_SECRETS'],
    ] as const) {
      const e = refusal(env);
      expect(e.message, JSON.stringify(env)).toContain(field);
      expect(e.message, JSON.stringify(env)).toContain('"*" is every tenant');
    }
    // On its own it is every tenant, as before; a list of tenant names is those tenants.
    expect(loadConfig({ OPERATORS: operator('*') }).OPERATORS[0]!.tenants).toBe('*');
    expect(loadConfig({ OPERATORS: operator(['acme', 'globex_2']) }).OPERATORS[0]!.tenants).toEqual([
      'acme',
      'globex_2',
    ]);
  });

  it('an OIDC token whose tenants claim lists it is refused (401, claim_invalid); "*" alone still reads every tenant', async () => {
    const failures = async () =>
      (await h.ctx.metrics.operatorAuthFailures.get()).values.find(
        (v) => v.labels.method === 'oidc' && v.labels.reason === 'claim_invalid',
      )?.value ?? 0;
    const before = await failures();
    for (const tenants of [['*'], ['acme', '*'], ['acme', 'acme corp']]) {
      const token = await sign({ email: 'eve@example.com', role: 'viewer', tenants });
      for (const query of [byCustomer, bySubject('globex')])
        expect((await searched(query, { authorization: `Bearer ${token}` })).status, JSON.stringify(tenants)).toBe(401);
    }
    expect((await failures()) - before).toBe(6);
    const every = await sign({ email: 'val@example.com', role: 'viewer', tenants: '*' });
    expect(await searched(byCustomer, { authorization: `Bearer ${every}` })).toEqual({
      status: 200,
      ids: [runs.acme!, runs.globex!].sort(),
    });
    const scoped = await sign({ email: 'gil@example.com', role: 'viewer', tenants: ['acme'] });
    expect(await searched(byCustomer, { authorization: `Bearer ${scoped}` })).toEqual({
      status: 200,
      ids: [runs.acme!],
    });
  });

  it('the search keeps a scoped reader to its tenants: a session that still holds "*" in its list finds none', async () => {
    // A console session opened with such a token before it was refused: the session keeps the JWT's operator.
    const id = randomBytes(32).toString('base64url');
    const session = {
      operator: { name: 'eve@example.com', role: 'viewer', tenants: ['*'], expiresAt: Date.now() + 600_000 },
      csrf: randomBytes(24).toString('base64url'),
      credential: 'jwt',
      epoch: 0,
    };
    await h.ctx.redis.set(h.ctx.keys.consoleSession(id), JSON.stringify(session), 'PX', 600_000);
    const signature = createHmac('sha256', SESSION_SECRET).update(id).digest('base64url');
    const cookie = { cookie: `console_session=${id}.${signature}` };
    for (const query of [byCustomer, bySubject('acme'), bySubject('globex')])
      expect(await searched(query, cookie), query).toEqual({ status: 200, ids: [] });
    // The same session scoped to acme finds acme's run only.
    session.operator.tenants = ['acme'];
    await h.ctx.redis.set(h.ctx.keys.consoleSession(id), JSON.stringify(session), 'PX', 600_000);
    expect(await searched(byCustomer, cookie)).toEqual({ status: 200, ids: [runs.acme!] });
    expect(await searched(byCustomer, { authorization: `Bearer ${OPERATOR_TOKEN}` })).toEqual({
      status: 200,
      ids: [runs.acme!, runs.globex!].sort(),
    });
  });
});
