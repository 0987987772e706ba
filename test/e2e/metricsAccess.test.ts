/**
 * /metrics names tenants and volumes: METRICS_TOKEN protects it on every
 * process, API_METRICS_PORT moves the API's to a separate port, and in
 * production no process serves it without a token (one rule: metricsRefusal).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { spawnApi, spawnReconciler, spawnWorker, type SpawnedProcess } from '../../testkit/processes.js';
import { startOpsServer } from '../../src/http/opsServer.js';
import { newMetrics } from '../../src/metrics/metrics.js';
import { freePort } from '../../testkit/embeddedRedis.js';
import { createHarness, type Harness } from '../../testkit/harness.js';

const TOKEN = 'metrics-token-for-tests';
/** A production environment the configuration accepts, with no METRICS_TOKEN. */
const PRODUCTION = {
  APP_MODE: 'production',
  MODEL_PROVIDER: 'openai',
  OPENAI_API_KEY: 'sk-test-not-used',
  OPERATOR_TOKEN: 'operator-token-for-tests',
  ZENDESK_EMAIL: 'agent@example.com',
  ZENDESK_TOKEN: 'not-used',
  RESEND_API_KEY: 're_not_used',
  RESEND_FROM: 'Support <support@example.com>',
  STRIPE_API_KEY: 'sk_test_not_used',
};
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

  it('production: the main port refuses unauthenticated metrics with a 503 naming METRICS_TOKEN', async () => {
    const url = await api(PRODUCTION);
    const res = await scrape(url);
    expect(res.status).toBe(503);
    const body = (await res.json()) as { message: string };
    expect(body.message).toContain('METRICS_TOKEN');
  });

  it('production without METRICS_TOKEN: a real worker, reconciler and API_METRICS_PORT answer 503 naming it, no series', async () => {
    const h = await createHarness('metricsprod', PRODUCTION);
    harnesses.push(h);
    const procs: SpawnedProcess[] = [];
    try {
      const worker = await spawnWorker(h.env);
      procs.push(worker);
      const reconciler = await spawnReconciler(h.env);
      procs.push(reconciler);
      const metricsPort = await freePort();
      procs.push(await spawnApi({ ...h.env, API_METRICS_PORT: String(metricsPort) }));
      const portOf = (p: SpawnedProcess, code: string) =>
        (JSON.parse(p.lines.find((l) => l.includes(`"${code}"`))!) as { metricsPort: number }).metricsPort;
      const urls = [
        `http://127.0.0.1:${portOf(worker, 'worker_started')}`,
        `http://127.0.0.1:${portOf(reconciler, 'reconciler_started')}`,
        `http://127.0.0.1:${metricsPort}`,
      ];
      for (const url of urls) {
        for (const token of [undefined, 'any-token-at-all']) {
          const res = await scrape(url, token);
          const text = await res.text();
          expect(res.status, url).toBe(503);
          expect(text, url).toContain('METRICS_TOKEN');
          expect(text, url).not.toContain('agent_');
        }
      }
      // Its health is still served: the process runs, only its metrics wait for the token.
      expect((await fetch(`${urls[0]}/readyz`)).status).toBe(200);
    } finally {
      for (const p of procs) p.child.kill('SIGTERM');
      await Promise.all(procs.map((p) => p.exited));
    }
  }, 120_000);

  it('the worker and reconciler ops server requires the token too', async () => {
    const { server, port } = await startOpsServer({
      port: 0,
      host: '127.0.0.1',
      registry: newMetrics().registry,
      isReady: () => true,
      metricsAccess: { METRICS_TOKEN: TOKEN, APP_MODE: 'production' },
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
