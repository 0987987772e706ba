/**
 * A service's 5xx body never becomes an error's details (src/core/httpJson.ts): details become a ledger move's
 * evidence, kept in Redis, the run view and the archive, and an erasure keeps the audit fields of evidence (`to`,
 * `reason`, ...), so a body echoing the customer (`{to: <email>, reason: 'customer wrote: ...'}`) would outlive
 * the erasure. The write goes to outcome_unknown with the status as its evidence, and nothing of the body is stored.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEffectRunner } from '../../src/ledger/runner.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { ResendClient } from '../../src/agents/support/vendors/resend.js';
import { sendEmailTool } from '../../src/agents/support/tools/sendEmail.js';
import { httpJson } from '../../src/core/httpJson.js';
import { AgentError, OutcomeUnknownError } from '../../src/core/errors.js';
import type { WriteTool } from '../../src/core/tool.js';
import { createHarness, redisUrl, type Harness } from '../../testkit/harness.js';
import { redisHits } from '../support/storedHits.js';

const ECHO = `ECHO-${randomBytes(4).toString('hex')}`;
const ECHOED_EMAIL = `jo-${randomBytes(3).toString('hex')}@example.com`;

let h: Harness;
let server: Server;
let url: string;
beforeAll(async () => {
  h = await createHarness('serviceerrorbodies', { RECONCILE_DEADLINE_MS: '400', RECONCILE_POLL_MS: '20' });
  // A service whose error body quotes the customer, in fields an audit keeps by name.
  server = createServer((_req, res) => {
    res.writeHead(500, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        error: { type: 'db_error', message: `lookup failed for ${ECHOED_EMAIL}` },
        to: ECHOED_EMAIL,
        reason: `customer wrote: my card 4111 ${ECHO}`,
      }),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server?.close();
  await h?.close();
});

describe("a service's 5xx body", () => {
  it('is not in the error: its details are the status', async () => {
    const err = await httpJson(`${url}/v1/customers`, {
      method: 'GET',
      timeoutMs: 2000,
      signal: new AbortController().signal,
    }).catch((e: unknown) => e);
    expect(err).toMatchObject({ retry: 'outcome_unknown', message: 'service answered 500' });
    expect((err as { details: unknown }).details).toEqual({ status: 500 });
  });

  it("is not a ledger move's evidence, nor anywhere in Redis", async () => {
    const runner = createEffectRunner(h.ctx);
    const tool = sendEmailTool(
      new ResendClient({ baseUrl: url, apiKey: 're_test', from: 'S <s@example.com>', timeoutMs: 2000 }),
    ) as WriteTool;
    const runId = `r_bodies_${Date.now()}`;
    const outcome = await runner.run({
      tool,
      args: { to: 'ada@example.com', template: 'ack', subject: 'Re: your order', body: 'Dear Ada' },
      call: { id: 'c1' },
      ctx: { runId, step: 1, signal: new AbortController().signal, input: {} },
      tenant: 'acme',
    });
    const { actionId } = outcome as { actionId: string };
    const history = await new Ledger(h.ctx.redis, h.ctx.keys).history(runId, actionId);
    const unknown = history.find((m) => m.to === 'outcome_unknown');
    expect(unknown?.evidence).toEqual({ error: 'service answered 500', status: 500 });
    expect(JSON.stringify(history)).not.toContain(ECHO);
    expect(await redisHits(redisUrl(), ECHO, `${h.env.KEY_PREFIX}*`)).toEqual([]);
    expect(await redisHits(redisUrl(), ECHOED_EMAIL, `${h.env.KEY_PREFIX}*`)).toEqual([]);
  });

  it("a tool's own error details: only the coded keys become evidence, or the model's refusal", async () => {
    const runner = createEffectRunner(h.ctx);
    const ledger = new Ledger(h.ctx.redis, h.ctx.keys);
    const email = sendEmailTool(
      new ResendClient({ baseUrl: url, apiKey: 're_test', from: 'S <s@example.com>', timeoutMs: 2000 }),
    ) as WriteTool;
    // A third-party tool that puts the service's answer in its error under names of its own.
    const throwing = (err: Error): WriteTool => ({ ...email, dispatch: () => Promise.reject(err) });
    const args = { to: 'ada@example.com', template: 'ack', subject: 'Re: your order', body: 'Dear Ada' };
    const send = async (tool: WriteTool, runId: string) => {
      const outcome = await runner.run({
        tool,
        args,
        call: { id: 'c1' },
        ctx: { runId, step: 1, signal: new AbortController().signal, input: {} },
        tenant: 'acme',
      });
      return ledger.history(runId, (outcome as { actionId: string }).actionId);
    };
    const echoed = { answer: { to: ECHOED_EMAIL }, to: ECHOED_EMAIL, note: `customer wrote ${ECHO}` };

    const unknown = await send(
      throwing(new OutcomeUnknownError('tool failed', { status: 502, ...echoed })),
      `r_tooldetails_u_${Date.now()}`,
    );
    expect(unknown.find((m) => m.to === 'outcome_unknown')?.evidence).toEqual({ error: 'tool failed', status: 502 });

    const refused = await send(
      throwing(new AgentError('invalid_input', 'refused', { status: 422, code: 'invalid_to', ...echoed })),
      `r_tooldetails_r_${Date.now()}`,
    );
    expect(refused.at(-1)?.evidence).toEqual({ status: 422, code: 'invalid_to' });
    expect(JSON.stringify([unknown, refused])).not.toContain(ECHO);
    expect(await redisHits(redisUrl(), ECHO, `${h.env.KEY_PREFIX}*`)).toEqual([]);
    expect(await redisHits(redisUrl(), ECHOED_EMAIL, `${h.env.KEY_PREFIX}*`)).toEqual([]);
  });
});
