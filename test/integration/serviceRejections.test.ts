/**
 * A service that refuses a write outright (here Resend's 403 `invalid_api_key`, in its own wire format, from the
 * sandbox's Resend stand-in) settles the action with no effect: the model is told `rejected`, never `ok`, on the
 * first answer and on a redelivery; the refusal is logged (`service_rejected`, HTTP status and the vendor's error
 * code, no customer text) and counted by tool and status (`agent_service_rejections_total`, whose 401/403 fire
 * AgentServiceCredentialsRefused). Before, it was told `ok` and counted like any confirmed write.
 * A same-key replay the service refuses so (the answer to the first request lost, the key revoked before the
 * reconciliation re-sends it) goes to a person, logged and counted alike.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEffectRunner } from '../../src/ledger/runner.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { ResendClient } from '../../src/agents/support/vendors/resend.js';
import { sendEmailTool } from '../../src/agents/support/tools/sendEmail.js';
import type { WriteTool } from '../../src/core/tool.js';
import { newMetrics } from '../../src/metrics/metrics.js';
import { createHarness, supportTool, type Harness } from '../../testkit/harness.js';

let h: Harness;
beforeAll(async () => {
  h = await createHarness('servicerejections');
});
afterAll(async () => {
  await h.close();
});

describe('a write the service refuses', () => {
  it("Resend's 403 invalid_api_key: rejected to the model, logged, counted by status, never sent again", async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    const runner = createEffectRunner({ ...h.ctx, log: pino(sink) });
    // A key of another product (Stripe's): Resend answers 403 invalid_api_key.
    const tool = sendEmailTool(
      new ResendClient({ baseUrl: h.sandbox.url, apiKey: 'sk_live_wrong', from: 'S <s@example.com>', timeoutMs: 2000 }),
    ) as WriteTool;
    const runId = `r_refused_${Date.now()}`;
    const request = {
      tool,
      args: { to: 'ada@example.com', template: 'ack', subject: 'Re: your order', body: 'Dear Ada' },
      call: { id: 'c1' },
      ctx: { runId, step: 1, signal: new AbortController().signal, input: {} },
      tenant: 'acme',
    };

    const first = await runner.run(request);
    const refusal = { rejected: true, vendor: 'resend', status: 403, code: 'invalid_api_key' };
    expect(first).toMatchObject({ kind: 'observed', status: 'rejected', output: refusal });
    // A redelivery reads the settled refusal: rejected again, nothing re-sent.
    expect(await runner.run(request)).toMatchObject({ kind: 'observed', status: 'rejected', output: refusal });

    const rejections = (await h.ctx.metrics.serviceRejections.get()).values;
    expect(rejections).toEqual([expect.objectContaining({ labels: { tool: 'send_email', status: '403' }, value: 1 })]);
    const logged = lines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.code === 'service_rejected');
    expect(logged).toEqual([
      expect.objectContaining({ code: 'service_rejected', status: '403', vendorCode: 'invalid_api_key', runId }),
    ]);
    expect(JSON.stringify(logged)).not.toMatch(/ada@example\.com|Dear Ada/);
    const rec = await new Ledger(h.ctx.redis, h.ctx.keys).get(runId, (first as { actionId: string }).actionId);
    expect(rec).toMatchObject({ state: 'confirmed', outcome: 'rejected_by_service', attempts: 1 });
    expect(h.sandbox.counts().byResource.emails.records).toBe(0);
  });

  it("a same-key replay refused with a 403: to a person, logged and counted as a step's refusal is", async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    const metrics = newMetrics();
    const runner = createEffectRunner({ ...h.ctx, metrics, log: pino(sink) });
    const sent = supportTool(h.ctx, 'send_email') as WriteTool;
    const revoked = sendEmailTool(
      new ResendClient({ baseUrl: h.sandbox.url, apiKey: 'sk_live_wrong', from: 'S <s@example.com>', timeoutMs: 2000 }),
    ) as WriteTool;
    // The first request is sent with the deployment's key and its answer lost; the replay leaves with a revoked one.
    let dispatches = 0;
    const tool: WriteTool = {
      ...revoked,
      dispatch: (args, ctx, req) => (dispatches++ === 0 ? sent : revoked).dispatch(args, ctx, req),
    };
    h.sandbox.setFaults([{ kind: 'lost_response_after_commit', resource: 'emails', count: 1 }]);
    const runId = `r_replayrefused_${Date.now()}`;
    const result = await runner.run({
      tool,
      args: { to: 'ada@example.com', template: 'ack', subject: 'Re: your order', body: 'Dear Ada' },
      call: { id: 'c1' },
      ctx: { runId, step: 1, signal: new AbortController().signal, input: {} },
      tenant: 'acme',
    });
    h.sandbox.setFaults([]);

    expect(result).toMatchObject({ kind: 'park', status: 'needs_human' });
    expect(dispatches).toBe(2);
    const actionId = (result as { actionId: string }).actionId;
    const history = await new Ledger(h.ctx.redis, h.ctx.keys).history(runId, actionId);
    expect(history.at(-1)).toMatchObject({ to: 'needs_human', why: 'the service refused the same-key replay' });
    expect((await metrics.serviceRejections.get()).values).toEqual([
      expect.objectContaining({ labels: { tool: 'send_email', status: '403' }, value: 1 }),
    ]);
    const logged = lines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.code === 'service_rejected');
    expect(logged).toEqual([
      expect.objectContaining({ status: '403', vendorCode: 'invalid_api_key', runId, actionId, tool: 'send_email' }),
    ]);
    expect(JSON.stringify(logged)).not.toMatch(/ada@example\.com|Dear Ada/);
    expect(h.sandbox.counts().byResource.emails.records).toBe(1);
  });
});
