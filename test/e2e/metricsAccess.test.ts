/**
 * /metrics names tenants and volumes: METRICS_TOKEN protects it on every
 * process, API_METRICS_PORT moves the API's to a separate port, and in
 * production the API's main port never serves it without a token.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { spawnApi } from '../../testkit/processes.js';
import { startOpsServer } from '../../src/http/opsServer.js';
import { newMetrics } from '../../src/metrics/metrics.js';
import { freePort } from '../../testkit/embeddedRedis.js';
import { createHarness, type Harness } from '../../testkit/harness.js';

const TOKEN = 'metrics-token-for-tests';
const harnesses: Harness[] = [];
afterAll(async () => {
  for (const h of harnesses) await h.close();
});

async function api(env: Record<string, string>): Promise<string> {
  const h = await createHarness('metricsaccess', env);
  harnesses.push(h);
  return (await h.startApi()).url;
}

const scrape = (url: string, token?: string) =>
  fetch(`${url}/metrics`, { headers: token ? { authorization: `Bearer ${token}` } : {} });

describe('/metrics access', () => {
  it('METRICS_TOKEN: the API answers 401 without it or with another token, 200 with it', async () => {
    const url = await api({ METRICS_TOKEN: TOKEN });
    expect((await scrape(url)).status).toBe(401);
    expect((await scrape(url, 'producer-token-for-tests')).status).toBe(401);
    const ok = await scrape(url, TOKEN);
    expect(ok.status).toBe(200);
    expect(await ok.text()).toContain('agent_');
  });

  it('production: the main port refuses unauthenticated metrics with a 503 naming both settings', async () => {
    const url = await api({
      APP_MODE: 'production',
      MODEL_PROVIDER: 'openai',
      OPENAI_API_KEY: 'sk-test-not-used',
      OPERATOR_TOKEN: 'operator-token-for-tests',
      ZENDESK_EMAIL: 'agent@example.com',
      ZENDESK_TOKEN: 'not-used',
      RESEND_API_KEY: 're_not_used',
      RESEND_FROM: 'Support <support@example.com>',
      STRIPE_API_KEY: 'sk_test_not_used',
    });
    const res = await scrape(url);
    expect(res.status).toBe(503);
    const body = (await res.json()) as { message: string };
    expect(body.message).toContain('METRICS_TOKEN');
    expect(body.message).toContain('API_METRICS_PORT');
  });

  it('the worker and reconciler ops server requires the token too', async () => {
    const { server, port } = await startOpsServer({
      port: 0,
      host: '127.0.0.1',
      registry: newMetrics().registry,
      isReady: () => true,
      metricsToken: TOKEN,
    });
    try {
      const url = `http://127.0.0.1:${port}`;
      expect((await scrape(url)).status).toBe(401);
      expect((await scrape(url, TOKEN)).status).toBe(200);
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
    } finally {
      server.close();
    }
  });

  it('API_METRICS_PORT: a real API process serves /metrics there (with the token) and not on PORT', async () => {
    const h = await createHarness('metricsport');
    harnesses.push(h);
    const [port, metricsPort] = [await freePort(), await freePort()];
    const api = await spawnApi({
      ...h.env,
      PORT: String(port),
      API_METRICS_PORT: String(metricsPort),
      METRICS_TOKEN: TOKEN,
    });
    try {
      const main = `http://127.0.0.1:${port}`;
      const metrics = `http://127.0.0.1:${metricsPort}`;
      expect((await fetch(`${main}/healthz`)).status).toBe(200);
      expect((await scrape(main, TOKEN)).status).toBe(404);
      expect((await scrape(metrics)).status).toBe(401);
      const ok = await scrape(metrics, TOKEN);
      expect(ok.status).toBe(200);
      expect(await ok.text()).toContain('agent_');
    } finally {
      api.child.kill('SIGTERM');
      await api.exited;
    }
  });
});
