/** Logs never carry customer text: errors go through pino's err serializer, with URL paths and queries redacted. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext } from '../../src/server/buildContext.js';
import { loadConfig } from '../../src/config/config.js';
import { RetryableError } from '../../src/core/errors.js';
import { createLogger, redactUrls } from '../../src/metrics/log.js';
import { newMetrics } from '../../src/metrics/metrics.js';
import { buildSpec } from '../../src/producer/intake.js';
import { freePort } from '../../testkit/embeddedRedis.js';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { captureLines as capture } from '../support/logCapture.js';

describe('redactUrls', () => {
  it('keeps scheme://host and drops credentials, paths and queries', () => {
    expect(redactUrls('GET https://api.example.com/v1/customers/carol%40example.com failed')).toBe(
      'GET https://api.example.com/[redacted] failed',
    );
    expect(redactUrls('POST http://127.0.0.1:4010/v1/emails?to=carol@example.com: 500')).toBe(
      'POST http://127.0.0.1:4010/[redacted]: 500',
    );
    expect(redactUrls('redis://:s3cret@redis:6379/0 down')).toBe('redis://[redacted]@redis:6379/[redacted] down');
    expect(redactUrls('http://sandbox:4010/ and http://sandbox:4010')).toBe(
      'http://sandbox:4010/ and http://sandbox:4010',
    );
    expect(redactUrls('no url here: carol')).toBe('no url here: carol');
  });
});

describe('the err serializer', () => {
  it('logs type, stack and cause, with every URL path and query redacted, also from a bare message string', () => {
    const out = capture();
    const log = createLogger('logtest', 'info', out.stream);
    const cause = new Error('fetch failed: https://api.example.com/v1/customers?email=carol@example.com');
    const err = Object.assign(
      new RetryableError('connection refused: http://127.0.0.1:1/v1/customers/carol%40example.com', undefined, {
        url: 'http://127.0.0.1:1/v1/customers?email=carol@example.com',
      }),
      { cause },
    );
    log.warn({ code: 'tool_error', err }, 'read tool failed');
    log.warn(
      { code: 'tool_error', err: 'connection refused: http://127.0.0.1:1/v1/customers/carol%40example.com' },
      'legacy call site',
    );
    const [first, second] = out.lines() as { err: Record<string, unknown> }[];
    expect(first!.err.type).toBe('RetryableError');
    expect(String(first!.err.stack)).toContain('RetryableError');
    expect(String(first!.err.stack)).toContain('caused by');
    expect(String(first!.err.message)).toContain('connection refused: http://127.0.0.1:1/[redacted]');
    expect(second!.err).toBe('connection refused: http://127.0.0.1:1/[redacted]');
    expect(out.text()).not.toMatch(/carol/i);
  });
});

describe('a failing tool in a real worker', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness('logworker');
  });
  afterAll(async () => {
    await h.close();
  });

  it('logs the error without the customer email in the URL it called', async () => {
    // A port nobody listens on: the customer lookup is refused, and its error quotes the URL.
    const port = await freePort();
    const cfg = loadConfig({ ...h.env, SANDBOX_URL: `http://127.0.0.1:${port}`, LOG_LEVEL: 'info' });
    const out = capture();
    const ctx = await createContext(cfg, 'logworker', {
      log: createLogger('logworker', 'info', out.stream),
      metrics: newMetrics(),
    });
    const lookup = { name: 'lookup_customer', args: { email: 'Carol.Customer@example.com' } };
    const spec = buildSpec(
      ctx,
      {
        tenant: 'acme',
        ticket: sampleTicket(`LOG-${Date.now()}`),
        agent: {
          model: 'scripted',
          script: [
            { toolCalls: [lookup], usage: { promptTokens: 10, completionTokens: 5 }, transientFailures: 0 },
            { toolCalls: [], final: 'done', usage: { promptTokens: 10, completionTokens: 5 }, transientFailures: 0 },
          ],
        },
      },
      Date.now(),
    );
    await ctx.store.create(spec, Date.now());
    await h.startWorker({}, ctx);
    expect(await h.waitForStatus(spec.runId, ['completed', 'failed', 'needs_human'])).toBe('completed');
    const failed = out.lines().filter((l) => l.code === 'tool_error');
    expect(failed.length).toBeGreaterThan(0);
    expect(JSON.stringify(failed)).toContain(`http://127.0.0.1:${port}/[redacted]`);
    expect(out.text()).not.toMatch(/carol/i);
  });
});
