/**
 * The engine/agent seam: a tool's context is only `{ runId, step, signal,
 * trace?, input }`, each tool is built with its own service configuration, a
 * model request carries the agent's instructions and prompt (no prompt text in
 * a provider), and the engine's files never name the support domain.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSupportTools } from '../../src/agents/support/tools/index.js';
import { supportAgent } from '../../src/agents/support/index.js';
import type { ReadTool, ToolContext, WriteTool } from '../../src/core/tool.js';
import { ScriptedProvider } from '../../src/models/scripted.js';
import { estimateCallTokens } from '../../src/budget/tenantBudget.js';
import { countTokens } from '../../src/core/tokens.js';
import { startSandbox, type SandboxHandle } from '../../sandbox/server.js';
import { TerminalError } from '../../src/core/errors.js';
import { sampleTicket } from '../../testkit/harness.js';

let sandbox: SandboxHandle;
beforeAll(async () => {
  sandbox = await startSandbox({ port: 0 });
});
afterAll(async () => {
  await sandbox.close();
});

const ticket = sampleTicket('SEAM-1');
const ctxFor = (input: unknown): ToolContext => ({
  runId: 'r_seam',
  step: 1,
  signal: new AbortController().signal,
  input,
});

describe('tools are built with their own service configuration', () => {
  it('keeps the tool schema hash runs are pinned to (no version_mismatch from the refactor)', () => {
    // support-agent@2: wait_for_reply and check_back_later joined the tools (support-agent@1 was ff17df41c8f9a2a1).
    expect(supportAgent({ baseUrl: 'http://127.0.0.1:9' }).tools.schemaHash).toBe('3bf043fb192e9083');
  });

  it('a tool calls the service it was built with, from a context of only runId, step, signal and input', async () => {
    const tools = new Map(createSupportTools({ baseUrl: sandbox.url }).map((t) => [t.name, t]));
    const ctx = ctxFor(ticket);
    expect(Object.keys(ctx).sort()).toEqual(['input', 'runId', 'signal', 'step']);

    const kb = await (tools.get('search_kb') as ReadTool).execute({ query: 'broken' }, ctx);
    expect(kb).toBeDefined();
    const customer = await (tools.get('lookup_customer') as ReadTool).execute({ email: ticket.customer.email }, ctx);
    expect(customer).toBeDefined();

    const email = tools.get('send_email') as WriteTool;
    const args = { to: ticket.customer.email, template: 'seam', subject: 'Hi', body: 'Hello' };
    const req = {
      actionId: 'a_seam_1',
      idempotencyKey: 'seam-key-1',
      requestId: 'rq_seam_1',
      timeoutMs: 5000,
      signal: ctx.signal,
    };
    const sent = await email.dispatch(args, ctx, req);
    expect(sent.replayed).toBe(false);
    // Resend's way to settle a doubt: the same request with the same key answers the original, sends nothing.
    const again = await email.dispatch(args, ctx, req);
    expect(again.receipt).toBe(sent.receipt);
    expect(sandbox.counts().byResource.emails?.records).toBe(1);
  });

  it('two registries built with different services each reach their own', async () => {
    const other = await startSandbox({ port: 0 });
    try {
      const a = supportAgent({ baseUrl: sandbox.url }).tools.get('create_ticket') as WriteTool;
      const b = supportAgent({ baseUrl: other.url }).tools.get('create_ticket') as WriteTool;
      const args = { subject: 'Follow-up', body: 'B', priority: 'normal', sourceTicketId: ticket.id };
      const req = {
        actionId: 'a_seam_2',
        idempotencyKey: 'seam-key-2',
        requestId: 'rq_seam_2',
        timeoutMs: 5000,
        signal: new AbortController().signal,
      };
      await a.dispatch(args, ctxFor(ticket), req);
      await b.dispatch(args, ctxFor(ticket), { ...req, idempotencyKey: 'seam-key-3' });
      expect(sandbox.counts().byResource.tickets?.records).toBe(1);
      expect(other.counts().byResource.tickets?.records).toBe(1);
    } finally {
      await other.close();
    }
  });

  it('read_ticket reads the run input, and refuses an input that is not a ticket', async () => {
    const read = createSupportTools({ baseUrl: sandbox.url }).find((t) => t.name === 'read_ticket') as ReadTool;
    expect(await read.execute({}, ctxFor(ticket))).toEqual({
      id: ticket.id,
      subject: ticket.subject,
      body: ticket.body,
      customer: ticket.customer,
    });
    const refused = await read.execute({}, ctxFor({ order: 42 })).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(TerminalError);
    expect((refused as TerminalError).code).toBe('invalid_input');
  });
});

describe("a model request carries the agent's instructions and prompt", () => {
  const base = {
    runId: 'r_seam',
    step: 1,
    attempt: 1,
    tools: [],
    maxCompletionTokens: 10,
    signal: new AbortController().signal,
  };
  const agent = supportAgent({ baseUrl: 'http://127.0.0.1:9' });

  it("the OpenAI prompt is the same messages as before, from the support agent's instructions and prompt", () => {
    const input = {
      id: 'T-9',
      subject: 'Broken widget',
      body: 'It stopped.\nPlease help.',
      customer: { email: 'ada@example.com', name: 'Ada' },
    };
    // The providers send these as the system prompt and the first user message (test/integration/models/providers.test.ts).
    expect(agent.instructions(input)).toBe(
      'You are a support agent. Use the tools to resolve the ticket, then answer with a short final summary.',
    );
    expect(agent.prompt(input)).toBe(
      'Ticket T-9: Broken widget\n\nIt stopped.\nPlease help.\n\nCustomer: Ada <ada@example.com>',
    );
  });

  it("the scripted provider plays the support agent's demo script", async () => {
    const turn = await new ScriptedProvider().complete({
      ...base,
      instructions: '',
      prompt: '',
      step: 2,
      script: agent.demoScript!(ticket),
    });
    // Both reads in one turn: the step runs them at once.
    expect(turn.toolCalls).toEqual([
      { id: 'call_2_0', name: 'lookup_customer', args: { email: ticket.customer.email } },
      { id: 'call_2_1', name: 'search_kb', args: { query: ticket.subject } },
    ]);
  });

  it("the budget estimate is the agent's (by default its instructions and first message) plus the tool schemas, by the tokenizer", () => {
    const inputTokens = countTokens(agent.instructions(ticket)) + countTokens(agent.prompt(ticket));
    expect(agent.estimateInputTokens(ticket)).toBe(inputTokens);
    const toolTokens = countTokens(JSON.stringify(agent.tools.specs));
    expect(toolTokens).toBeGreaterThan(100); // the schemas are part of the prompt, not free
    expect(estimateCallTokens(agent.estimateInputTokens(ticket), 300, 1024, agent.tools.specs)).toBe(
      300 + inputTokens + toolTokens + 1024,
    );
  });
});

describe('the engine does not name the domain', () => {
  const files = (p: string): string[] =>
    statSync(p).isDirectory() ? readdirSync(p).flatMap((f) => files(join(p, f))) : [p];
  const engine = ['src/core', 'src/runs', 'src/worker', 'src/ledger', 'src/store'].flatMap(files);

  it('no ticket, email, vendor or sandbox in the engine (core, runs, worker, ledger, store), compensation included', () => {
    const named = engine.filter((f) => {
      const text = readFileSync(f, 'utf8');
      return /ticket|sandbox|send_email|zendesk|stripe/i.test(text) || /\bResend\b/.test(text);
    });
    expect(named).toEqual([]);
  });
});
