/**
 * Provider usage is validated (non-negative safe integers, tokenUsageSchema): an
 * invalid usage is a provider error, handled like a missing one (the run fails
 * with a reason, nothing charged for that attempt), and never reaches the job
 * data of a later step. Against a real HTTP OpenAI-compatible fake.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness, sampleTicket, type Harness } from '../../testkit/harness.js';
import { buildSpec } from '../../src/producer/intake.js';
import { tokenUsageSchema } from '../../src/core/journal.js';

/** Usage the fake reports at step 1, by ticket id (raw JSON, so invalid values can be sent). */
const stepOneUsage: Record<string, unknown> = {
  'U-neg': { prompt_tokens: -5, completion_tokens: 10 },
  'U-huge': { prompt_tokens: 1e300, completion_tokens: 10 },
  'U-frac': { prompt_tokens: 10.5, completion_tokens: 10 },
  'U-ok': { prompt_tokens: 10, completion_tokens: 5 },
};

let server: Server;
let h: Harness;
beforeAll(async () => {
  server = createServer((req, res) => {
    let raw = '';
    req.on('data', (d: Buffer) => (raw += d.toString()));
    req.on('end', () => {
      const body = JSON.parse(raw) as { messages: { role: string; content?: string }[] };
      const ticketId = /^Ticket (\S+):/.exec(body.messages.find((m) => m.role === 'user')?.content ?? '')?.[1] ?? '';
      const later = body.messages.some((m) => m.role === 'assistant');
      const message = later
        ? { content: 'done' }
        : {
            content: null,
            tool_calls: [{ id: 'c1', type: 'function', function: { name: 'read_ticket', arguments: '{}' } }],
          };
      const usage = later ? { prompt_tokens: 20, completion_tokens: 5 } : stepOneUsage[ticketId];
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({
          id: 'chatcmpl-u',
          object: 'chat.completion',
          created: 1,
          model: 'm',
          choices: [
            { index: 0, message: { role: 'assistant', ...message }, finish_reason: later ? 'stop' : 'tool_calls' },
          ],
          usage,
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  h = await createHarness('usage', {
    OPENAI_BASE_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    OPENAI_API_KEY: 'sk-test',
  });
  await h.startWorker();
});
afterAll(async () => {
  await h.close();
  server.close();
});

async function run(ticketId: string): Promise<string> {
  const spec = buildSpec(
    h.ctx,
    { tenant: 'acme', ticket: sampleTicket(ticketId), agent: { model: 'openai' } },
    Date.now(),
  );
  await h.ctx.store.create(spec, Date.now());
  return spec.runId;
}

describe('provider usage validation', () => {
  it('the schema takes non-negative safe integers only', () => {
    for (const bad of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 1e300, 2 ** 53]) {
      expect(tokenUsageSchema.safeParse({ promptTokens: bad, completionTokens: 0 }).success).toBe(false);
    }
    expect(tokenUsageSchema.safeParse({ promptTokens: 2 ** 53 - 1, completionTokens: 0 }).success).toBe(true);
  });

  it('a negative, fractional or absurd usage fails the run with a reason; a valid run on the same worker completes', async () => {
    for (const id of ['U-neg', 'U-huge', 'U-frac']) {
      const runId = await run(id);
      expect(await h.waitForStatus(runId, ['completed', 'failed', 'budget_exceeded'], 15_000)).toBe('failed');
      const state = (await h.ctx.store.readState(runId))!;
      expect(state.reason).toMatch(/^invalid_usage: the provider reported an invalid token usage \(promptTokens/);
      // The provider answered with a usage it could not have meant: the attempt is charged its bound, never zero
      // (docs/budgets.md, what a failed attempt is charged), and the run is told why it failed.
      expect(state.used.tokens).toBeGreaterThan(0);
      expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).budget, 'tokensUsed')).toBe(String(state.used.tokens));
    }
    const ok = await run('U-ok');
    expect(await h.waitForStatus(ok, ['completed', 'failed', 'budget_exceeded'], 15_000)).toBe('completed');
    expect((await h.ctx.store.readState(ok))!.used.tokens).toBe(15 + 25);
  });
});
