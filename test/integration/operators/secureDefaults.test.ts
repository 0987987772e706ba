/**
 * Secure by default: no route that reads or changes runs is open because a
 * credential is missing (503 naming the setting), DEV_AUTH=generate is the
 * explicit development mode, and ids are checked by format before any Redis
 * access so a malformed, foreign or unknown id gets one and the same 404.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/config.js';
import { ConfigError } from '../../../src/core/errors.js';
import { createHarness, sampleTicket, type Harness } from '../../../testkit/harness.js';
import { warnIfDevelopment } from '../../../src/server/buildContext.js';
import { createLogger } from '../../../src/metrics/log.js';
import { captureLines } from '../../support/logCapture.js';
import { call, final, OPERATOR_TOKEN, operatorHarness, refund, startScripted, turn } from './support.js';

const ACME = 'acme-tenant-token-1';
const GLOBEX = 'globex-tenant-token-2';

describe('with no credential configured', () => {
  let h: Harness;
  let url: string;
  beforeAll(async () => {
    h = await createHarness('noauth', { PRODUCER_TOKEN: '' });
    url = (await h.startApi()).url;
  });
  afterAll(async () => {
    await h.close();
  });

  it('every operator and run route refuses with 503 naming the setting, even with a guessed token', async () => {
    const runId = await startScripted(h, [final], 'NOAUTH');
    const routes: [string, string, unknown, string][] = [
      ['GET', '/v1/approvals', undefined, 'OPERATOR_TOKEN'],
      [
        'POST',
        `/v1/approvals/a_${'0'.repeat(32)}`,
        { decision: 'approve', fingerprint: 'f', approver: 'x' },
        'OPERATOR_TOKEN',
      ],
      ['GET', '/v1/reconciliations', undefined, 'OPERATOR_TOKEN'],
      [
        'POST',
        `/v1/reconciliations/a_${'0'.repeat(32)}`,
        { finding: 'compensate', operator: 'x', evidence: {} },
        'OPERATOR_TOKEN',
      ],
      ['POST', `/v1/runs/${runId}/cancel`, {}, 'OPERATOR_TOKEN'],
      ['GET', '/admin/queues', undefined, 'BULL_BOARD_USER'],
      ['GET', '/admin/queues/api/queues', undefined, 'OPERATOR_TOKEN'],
      ['GET', `/runs/${runId}`, undefined, 'BULL_BOARD_PASSWORD'],
      ['GET', `/v1/runs/${runId}`, undefined, 'PRODUCER_TOKEN'],
      ['GET', `/v1/runs/${runId}/events`, undefined, 'TENANT_TOKENS'],
      ['POST', '/v1/runs', { tenant: 'acme', ticket: sampleTicket('NOAUTH-2') }, 'PRODUCER_TOKEN'],
    ];
    for (const [method, path, body, setting] of routes) {
      for (const token of [undefined, 'anything-at-all']) {
        const res = await fetch(`${url}${path}`, {
          method,
          headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
          ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        });
        expect(res.status, `${method} ${path}`).toBe(503);
        const json = (await res.json()) as { error: string; message: string };
        expect(json.error).toBe('auth_not_configured');
        expect(json.message, `${method} ${path}`).toContain(setting);
      }
    }
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'cancelRequested')).toBeNull();
  });
});

describe('DEV_AUTH=generate', () => {
  it('fills every unset credential with a random one, keeps the ones given, and is refused in production', () => {
    const a = loadConfig({ DEV_AUTH: 'generate' });
    const b = loadConfig({ DEV_AUTH: 'generate' });
    for (const c of [a, b]) {
      expect(c.OPERATOR_TOKEN!.length).toBeGreaterThanOrEqual(20);
      expect(c.PRODUCER_TOKEN!.length).toBeGreaterThanOrEqual(20);
      expect(c.BULL_BOARD_USER).toBe('operator');
      expect(c.BULL_BOARD_PASSWORD!.length).toBeGreaterThanOrEqual(20);
    }
    expect(a.OPERATOR_TOKEN).not.toBe(b.OPERATOR_TOKEN);
    expect(a.PRODUCER_TOKEN).not.toBe(a.OPERATOR_TOKEN);
    expect(loadConfig({ DEV_AUTH: 'generate', OPERATOR_TOKEN: 'mine-mine-mine' }).OPERATOR_TOKEN).toBe(
      'mine-mine-mine',
    );
    expect(loadConfig({}).OPERATOR_TOKEN).toBeUndefined();
    const prod = {
      APP_MODE: 'production',
      SCRIPTED_MODEL_ENABLED: 'true',
      PRODUCER_TOKEN: 'p',
      OPERATOR_TOKEN: 'o',
      DEV_AUTH: 'generate',
    };
    expect(() => loadConfig(prod)).toThrow(ConfigError);
    expect(() => loadConfig(prod)).toThrow(/DEV_AUTH/);
  });
});

describe('production without being told', () => {
  const secrets = {
    PRODUCER_TOKEN: 'a-producer-token-of-length',
    OPERATOR_TOKEN: 'an-operator-token-of-length',
    OPENAI_API_KEY: 'sk-test-key-0123456789',
    REDIS_URL: 'redis://127.0.0.1:6379',
  };

  it('NODE_ENV=production with no APP_MODE is production: its checks apply; APP_MODE=development stays a choice', () => {
    expect(loadConfig({ NODE_ENV: 'production', MODEL_PROVIDER: 'openai', ...secrets }).APP_MODE).toBe('production');
    expect(() => loadConfig({ NODE_ENV: 'production', MODEL_PROVIDER: 'scripted', ...secrets })).toThrow(
      /MODEL_PROVIDER: .*\(APP_MODE=production\)/,
    );
    expect(loadConfig({ NODE_ENV: 'production', APP_MODE: 'development' }).APP_MODE).toBe('development');
    expect(loadConfig({}).APP_MODE).toBe('development');
  });

  it("a worker, the reconciler and the replay tool boot without the API's credentials; the API does not", () => {
    const env = {
      APP_MODE: 'production',
      MODEL_PROVIDER: 'openai',
      OPENAI_API_KEY: secrets.OPENAI_API_KEY,
      REDIS_URL: secrets.REDIS_URL,
    };
    for (const role of ['worker', 'reconciler', 'replay'] as const)
      expect(loadConfig(env, { role }).PRODUCER_TOKEN, role).toBeUndefined();
    for (const role of ['api', undefined] as const)
      expect(() => loadConfig(env, role ? { role } : {}), String(role)).toThrow(/PRODUCER_TOKEN/);
  });

  it('a process in development mode says so once it serves, as a warning; one in production does not', () => {
    const captured = captureLines();
    const log = createLogger('devmode', 'info', captured.stream);
    warnIfDevelopment(loadConfig({}), log);
    warnIfDevelopment(loadConfig({ NODE_ENV: 'production', MODEL_PROVIDER: 'openai', ...secrets }), log);
    expect(captured.lines()).toEqual([
      expect.objectContaining({
        code: 'development_mode',
        level: 40,
        msg: expect.stringMatching(/APP_MODE=production/),
      }),
    ]);
  });
});

describe('ids are checked before any Redis access', () => {
  let h: Harness & { url: string };
  let acmeRun: string;
  let globexRun: string;
  beforeAll(async () => {
    h = await operatorHarness('ids', { TENANT_TOKENS: JSON.stringify({ acme: ACME, globex: GLOBEX }) });
    const create = async (tenant: string, token: string) =>
      (
        await call<{ runId: string }>(
          h.url,
          'POST',
          '/v1/runs',
          { tenant, ticket: sampleTicket(`ID-${tenant}-${Date.now()}`), agent: { model: 'scripted', script: [final] } },
          token,
        )
      ).body.runId;
    acmeRun = await create('acme', ACME);
    globexRun = await create('globex', GLOBEX);
    await h.waitForStatus(acmeRun, ['completed']);
    await h.waitForStatus(globexRun, ['completed']);
  });
  afterAll(async () => {
    await h.close();
  });

  const raw = async (path: string, token: string, method = 'GET', body?: unknown) => {
    const res = await fetch(`${h.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, type: res.headers.get('content-type'), text: await res.text() };
  };

  it("an existing run with a key suffix, another tenant's run and an unknown run answer the identical 404", async () => {
    const unknown = `r_${'0'.repeat(24)}`;
    const suffixed = [
      `${acmeRun}:journal`,
      `${acmeRun}:budget`,
      `${acmeRun}:events`,
      `${acmeRun}}`,
      `${acmeRun}%7D`,
      acmeRun.toUpperCase(),
      `${acmeRun}0`,
      'r_',
    ];
    for (const [token, foreign] of [
      [ACME, globexRun],
      [OPERATOR_TOKEN, undefined],
    ] as const) {
      for (const suffix of ['', '/events']) {
        const expected = await raw(`/v1/runs/${unknown}${suffix}`, token);
        expect(expected.status).toBe(404);
        for (const id of [...suffixed.map(encodeURIComponent), ...(foreign ? [foreign] : [])]) {
          expect(await raw(`/v1/runs/${id}${suffix}`, token), `${id}${suffix}`).toEqual(expected);
        }
      }
      const page = await raw(`/runs/${unknown}`, token);
      expect(page.status).toBe(404);
      for (const id of [...suffixed.map(encodeURIComponent), ...(foreign ? [foreign] : [])])
        expect(await raw(`/runs/${id}`, token), id).toEqual(page);
    }
    // The real run is there, read through the same routes.
    expect((await raw(`/v1/runs/${acmeRun}`, ACME)).status).toBe(200);
  });

  it('operator routes: a malformed run or action id is the same 404 as an unknown one, and changes nothing', async () => {
    const runId = await startScripted(h, [turn([refund(10_000)]), final], 'IDS');
    await h.waitForStatus(runId, ['waiting_approval']);
    const cancelUnknown = await raw(`/v1/runs/r_${'0'.repeat(24)}/cancel`, OPERATOR_TOKEN, 'POST', {});
    expect(cancelUnknown.status).toBe(404);
    for (const id of [`${runId}:journal`, `${runId}}`, `${runId}:budget`]) {
      expect(await raw(`/v1/runs/${encodeURIComponent(id)}/cancel`, OPERATOR_TOKEN, 'POST', {}), id).toEqual(
        cancelUnknown,
      );
    }
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')).toBe('waiting_approval');

    const { body } = await call<{ approvals: { runId: string; actionId: string; fingerprint: string }[] }>(
      h.url,
      'GET',
      '/v1/approvals',
    );
    const p = body.approvals.find((a) => a.runId === runId)!;
    const decision = { decision: 'approve', fingerprint: p.fingerprint, approver: 'alice' };
    const finding = { finding: 'not_sent', operator: 'alice', evidence: {} };
    const approvalUnknown = await raw(`/v1/approvals/a_${'0'.repeat(32)}`, OPERATOR_TOKEN, 'POST', decision);
    const findingUnknown = await raw(`/v1/reconciliations/a_${'0'.repeat(32)}`, OPERATOR_TOKEN, 'POST', finding);
    expect([approvalUnknown.status, findingUnknown.status]).toEqual([404, 404]);
    for (const id of [`${p.actionId}:history`, `${p.actionId}}`, p.actionId.toUpperCase()]) {
      expect(await raw(`/v1/approvals/${encodeURIComponent(id)}`, OPERATOR_TOKEN, 'POST', decision), id).toEqual(
        approvalUnknown,
      );
      expect(await raw(`/v1/reconciliations/${encodeURIComponent(id)}`, OPERATOR_TOKEN, 'POST', finding), id).toEqual(
        findingUnknown,
      );
    }
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'status')).toBe('waiting_approval');
  });
});
