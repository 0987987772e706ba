/**
 * Logs never carry customer text: errors go through pino's err serializer, with URL paths and queries redacted; an
 * error out of an agent's own code (its tools, its hooks) is logged with its type, code, coded details and stack
 * frames, never its message, in a real worker; the engine's and Redis's errors keep theirs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createContext } from '../../src/server/buildContext.js';
import { loadConfig } from '../../src/config/config.js';
import { defineAgent, defineReadTool, defineWriteTool } from '../../src/core/agent.js';
import { RetryableError } from '../../src/core/errors.js';
import { AGENT_MESSAGE_NOT_LOGGED, createLogger, redactUrls } from '../../src/metrics/log.js';
import { newMetrics } from '../../src/metrics/metrics.js';
import { buildSpec } from '../../src/producer/intake.js';
import { freePort } from '../../testkit/embeddedRedis.js';
import { createHarness, producerAuth, sampleTicket, type Harness } from '../../testkit/harness.js';
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
    // The support agent's tool is agent code: its error (httpJson's, quoting the URL) is logged by its code and
    // coded details, not its message.
    expect(failed[0]!.err).toMatchObject({ type: 'RetryableError', code: 'transient', details: { reason: 'refused' } });
    expect(String((failed[0]!.err as { message: string }).message)).toContain(AGENT_MESSAGE_NOT_LOGGED);
    expect(out.text()).not.toContain(`127.0.0.1:${port}/`);
    expect(out.text()).not.toMatch(/carol/i);
  });
});

const EMAIL = 'ada.lovelace@example.com';
const BODY = 'Dear Ada Lovelace, your refund of $5,000';

/** An agent whose tools throw errors the ordinary way: quoting the customer's address and the mail they send. */
const leaky = defineAgent({
  name: 'leaky',
  version: 'leaky@1',
  input: z.object({ orderId: z.string(), email: z.string() }).strict(),
  key: (i) => i.orderId,
  instructions: () => 'Look the order up and write to the customer.',
  tools: [
    defineReadTool({
      name: 'lookup_order',
      description: 'Looks an order up.',
      args: z.object({ orderId: z.string() }).strict(),
      execute: ({ orderId }, ctx) => {
        const { email } = ctx.input as { email: string };
        throw Object.assign(new Error(`no order ${orderId} for customer ${email}`), { code: 'order_missing', email });
      },
    }),
    defineWriteTool({
      name: 'send_note',
      description: 'Writes to the customer.',
      args: z.object({ to: z.string(), body: z.string() }).strict(),
      service: { enforcesKey: true, reconcile: 'none' },
      dispatch: ({ to, body }) =>
        Promise.reject(
          Object.assign(new Error(`mail server said: mailbox ${to} rejected "${body}"`), { code: 'mailbox_rejected' }),
        ),
    }),
  ],
});

describe("an agent's own tool errors in a real worker", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness('logagent');
  });
  afterAll(async () => {
    await h.close();
  });

  it('logs their type, code and stack frames, never the message quoting the customer; engine and Redis errors keep theirs', async () => {
    const out = capture();
    const log = createLogger('logagent', 'info', out.stream);
    const ctx = await createContext(h.cfg, 'logagent', { log, metrics: newMetrics(), agents: [leaky] });
    const usage = { promptTokens: 10, completionTokens: 5 };
    const spec = buildSpec(
      ctx,
      {
        tenant: 'acme',
        agent: 'leaky',
        input: { orderId: 'ORD-77', email: EMAIL },
        model: 'scripted',
        script: [
          // The model call fails once (the engine's own error, logged with its message), then reads.
          { toolCalls: [{ name: 'lookup_order', args: { orderId: 'ORD-77' } }], usage, transientFailures: 1 },
          { toolCalls: [{ name: 'send_note', args: { to: EMAIL, body: BODY } }], usage, transientFailures: 0 },
          { toolCalls: [], final: 'done', usage, transientFailures: 0 },
        ],
      },
      Date.now(),
    );
    await ctx.store.create(spec, Date.now());
    await h.startWorker({}, ctx);
    // The write's error fails the step; its redelivery finds the action dispatched with no way to reconcile.
    expect(await h.waitForStatus(spec.runId, ['completed', 'failed', 'needs_human'])).toBe('needs_human');
    // A Redis error, logged through the same logger.
    await ctx.redis.set(`${h.cfg.KEY_PREFIX}logagent:string`, 'x');
    const reply = await ctx.redis.hget(`${h.cfg.KEY_PREFIX}logagent:string`, 'f').catch((err: unknown) => err);
    log.warn({ code: 'redis_error', err: reply }, 'redis refused');

    const lines = out.lines();
    const toolError = lines.find((l) => l.code === 'tool_error');
    expect(toolError).toMatchObject({
      tool: 'lookup_order',
      err: { type: 'Error', code: 'order_missing', message: AGENT_MESSAGE_NOT_LOGGED },
    });
    expect(String((toolError!.err as { stack: string }).stack)).toMatch(/^Error: \[not logged: agent code\]\n\s+at /);
    const stepError = lines.find((l) => l.code === 'step_error');
    expect(stepError).toMatchObject({
      err: { type: 'Error', code: 'mailbox_rejected', message: AGENT_MESSAGE_NOT_LOGGED },
    });
    expect(String((stepError!.err as { stack: string }).stack)).toContain('    at ');
    // Nowhere in the logs: the address, the order, the body.
    expect(out.text()).not.toContain('ada.lovelace');
    expect(out.text()).not.toContain('Ada Lovelace');
    expect(out.text()).not.toContain('ORD-77');
    // The engine's error (the model's transient failure) and Redis's keep their messages.
    expect(lines.find((l) => l.code === 'model_retry')).toMatchObject({
      err: { type: 'RetryableError', message: 'scripted transient failure (503)' },
    });
    expect(lines.find((l) => l.code === 'redis_error')).toMatchObject({
      err: { type: 'ReplyError', message: expect.stringContaining('WRONGTYPE') },
    });
    // The run keeps the message where the model is shown it: the observation.
    const observed = (await ctx.store.transcript(spec.runId)).filter((e) => e.kind === 'observation');
    expect(observed[0]).toMatchObject({
      status: 'tool_error',
      output: { error: `no order ORD-77 for customer ${EMAIL}` },
    });
  });
});

/** An agent whose own schemas throw from a refinement, quoting what they were given (agent code too). */
const strict = defineAgent({
  name: 'strict',
  version: 'strict@1',
  input: z
    .object({ orderId: z.string(), email: z.string() })
    .strict()
    .refine((i) => {
      if (i.orderId === 'ORD-THROW') throw new Error(`order check failed for ${i.email}`);
      return true;
    }),
  key: (i) => i.orderId,
  instructions: () => 'Look the order up.',
  tools: [
    defineReadTool({
      name: 'lookup_order',
      description: 'Looks an order up.',
      args: z
        .object({ orderId: z.string() })
        .strict()
        .refine(({ orderId }) => {
          throw new Error(`no such order ${orderId} for ${EMAIL}`);
        }),
      execute: () => Promise.resolve({ found: false }),
    }),
  ],
});

describe("an agent's own schemas that throw", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness('logschema');
  });
  afterAll(async () => {
    await h.close();
  });

  it('are logged as agent code, in the API and in a real worker: never the message quoting the customer', async () => {
    const out = capture();
    const log = createLogger('logschema', 'info', out.stream);
    const ctx = await createContext(h.cfg, 'logschema', { log, metrics: newMetrics(), agents: [strict] });
    const { url } = await h.startApi(ctx);
    const res = await fetch(`${url}/v1/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...producerAuth },
      body: JSON.stringify({ tenant: 'acme', agent: 'strict', input: { orderId: 'ORD-THROW', email: EMAIL } }),
    });
    expect(res.status).toBe(500);
    expect(out.lines().find((l) => l.code === 'api_error')).toMatchObject({
      err: { type: 'Error', message: AGENT_MESSAGE_NOT_LOGGED },
    });

    const usage = { promptTokens: 10, completionTokens: 5 };
    const spec = buildSpec(
      ctx,
      {
        tenant: 'acme',
        agent: 'strict',
        input: { orderId: 'ORD-78', email: EMAIL },
        model: 'scripted',
        script: [
          { toolCalls: [{ name: 'lookup_order', args: { orderId: 'ORD-78' } }], usage, transientFailures: 0 },
          { toolCalls: [], final: 'done', usage, transientFailures: 0 },
        ],
      },
      Date.now(),
    );
    await ctx.store.create(spec, Date.now());
    await h.startWorker({}, ctx);
    await h.waitForStatus(spec.runId, ['completed', 'failed', 'needs_human']);
    const fromWorker = out.lines().filter((l) => l.err !== undefined && l.code !== 'api_error');
    expect(fromWorker.length).toBeGreaterThan(0);
    expect(out.text()).not.toContain('ada.lovelace');
    expect(out.text()).not.toContain('ORD-78');
  });
});
