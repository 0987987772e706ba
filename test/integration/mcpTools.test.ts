/**
 * MCP tools through the official SDK, client and server both real: the test
 * kit's booking server over stdio and streamable HTTP. Reads are taken as the
 * server marks them, a write only where declared; the idempotency key travels
 * in the call's `_meta`; the server's schemas are in the tools hash, so a
 * changed tool parks a run pinned to the old one in the version queue.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from '../../testkit/harness.js';
import { startMcpHttpServer, type McpHttpHandle } from '../../testkit/mcpServer.js';
import { connectMcpServer, MCP_META, type McpServerConnection } from '../../src/mcp/mcpTools.js';
import { defineAgent, type WriteTool } from '../../src/index.js';
import { createContext } from '../../src/server/buildContext.js';
import { buildSpec } from '../../src/producer/intake.js';
import { Ledger } from '../../src/ledger/ledger.js';
import type { EngineContext } from '../../src/runs/engineContext.js';
import { bookingScript } from '../../examples/mcp-booking/index.js';
import { scriptSchema } from '../../src/models/scriptedTurns.js';
import { z } from 'zod';
import { moduleArgs } from '../../testkit/spawnModule.js';

const opened: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const c of opened.splice(0).reverse()) await c.close();
});
const track = <T extends { close(): Promise<void> }>(c: T): T => (opened.push(c), c);

const req = (key: string) => ({
  actionId: `act-${key}`,
  idempotencyKey: key,
  requestId: `rq-${key}`,
  timeoutMs: 3000,
  signal: new AbortController().signal,
});
const toolCtx = { runId: 'r1', step: 1, signal: new AbortController().signal, input: {} };
const writeOf = (c: McpServerConnection, name: string) => c.tools.find((t) => t.name === name) as WriteTool;

describe('MCP tools over stdio (the SDK spawns the server)', () => {
  it('reads as the server marks them, the declared write, and one booking per key sent in _meta', async () => {
    const env = Object.fromEntries(
      Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined),
    );
    const conn = track(
      await connectMcpServer(
        {
          command: process.execPath,
          args: moduleArgs('testkit/mcpStdioServer'),
          env: { ...env, MCP_INSPECT: '1' },
        },
        { writes: { book_slot: {} } },
      ),
    );
    expect(conn.tools.map((t) => [t.name, t.effect])).toEqual([
      ['find_slots', 'read'],
      ['book_slot', 'write'],
      ['find_booking', 'read'],
      ['count_effects', 'read'],
    ]);
    const book = writeOf(conn, 'book_slot');
    expect(book.service).toEqual({ enforcesKey: true, reconcile: [] }); // default: a doubt goes to a person
    const first = await book.dispatch({ slot: 'mon', name: 'Ada' }, toolCtx, req('k-1'));
    const again = await book.dispatch({ slot: 'mon', name: 'Ada' }, toolCtx, req('k-1'));
    expect(first).toMatchObject({ receipt: 'bk_1', replayed: false });
    expect(again).toMatchObject({ receipt: 'bk_1', replayed: true });
    const counts = conn.tools.find((t) => t.name === 'count_effects')!;
    expect(counts.effect === 'read' && (await counts.execute({}, toolCtx))).toEqual({ effects: { 'k-1': 1 } });
  });
});

describe('MCP tools over streamable HTTP', () => {
  let server: McpHttpHandle;
  beforeEach(async () => {
    server = track(await startMcpHttpServer());
  });

  it('an undeclared tool the server does not mark read-only is left out; a declared tool it lacks stops the boot', async () => {
    const conn = track(await connectMcpServer({ url: server.url }));
    expect(conn.tools.map((t) => t.name)).toEqual(['find_slots', 'find_booking']);
    expect(conn.skipped).toEqual(['book_slot']);
    await expect(connectMcpServer({ url: server.url }, { writes: { cancel_slot: {} } })).rejects.toThrow(/cancel_slot/);
  });

  it('the key in _meta is the one the server counts; a server that ignores it books twice', async () => {
    const conn = track(
      await connectMcpServer(
        { url: server.url },
        { writes: { book_slot: { reconcile: { kind: 'replay_same_key', windowMs: 60_000 } } } },
      ),
    );
    const book = writeOf(conn, 'book_slot');
    expect(book.service.reconcile).toEqual([{ kind: 'replay_same_key', windowMs: 60_000 }]);
    await book.dispatch({ slot: 'mon', name: 'Ada' }, toolCtx, req('k-2'));
    await book.dispatch({ slot: 'mon', name: 'Ada' }, toolCtx, req('k-2'));
    expect(server.store.effects()).toEqual({ 'k-2': 1 });
    server.store.options.ignoreKeys = true;
    await book.dispatch({ slot: 'mon', name: 'Ada' }, toolCtx, req('k-2'));
    expect(server.store.effects()).toEqual({ 'k-2': 2 });
    expect(MCP_META.idempotencyKey).toBe('durable-agent-fleet/idempotency-key');
  });

  it('a server that is gone: a read is retryable, a write refused at connect is retryable (never sent)', async () => {
    const conn = track(await connectMcpServer({ url: server.url }, { writes: { book_slot: {} } }));
    await server.close();
    const read = conn.tools.find((t) => t.name === 'find_slots')!;
    await expect(read.effect === 'read' && read.execute({ day: 'mon' }, toolCtx)).rejects.toMatchObject({
      retry: 'retryable',
    });
    await expect(
      writeOf(conn, 'book_slot').dispatch({ slot: 'mon', name: 'Ada' }, toolCtx, req('k-3')),
    ).rejects.toMatchObject({ retry: 'retryable' });
  });
});

describe('MCP tools in a run', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await createHarness('mcprun');
  });
  afterEach(async () => {
    await h.close();
  });

  async function bookingAgentCtx(url: string): Promise<EngineContext> {
    const conn = track(await connectMcpServer({ url }, { writes: { book_slot: {} } }));
    const agent = defineAgent({
      name: 'mcp-booking',
      version: 'mcp-booking@1',
      tools: conn.tools,
      input: z.object({ requestId: z.string(), name: z.string(), day: z.string() }).strict(),
      instructions: () => 'book',
      key: (r) => r.requestId,
    });
    return createContext(h.cfg, 'mcprun', { agents: [agent] });
  }

  async function createRun(ctx: EngineContext, requestId: string): Promise<string> {
    const input = { requestId, name: 'Ada', day: 'mon' };
    const spec = buildSpec(
      ctx,
      {
        tenant: 'acme',
        agent: 'mcp-booking',
        input,
        model: 'scripted',
        script: scriptSchema.parse(bookingScript(input)),
      },
      Date.now(),
    );
    await ctx.store.create(spec, Date.now());
    return spec.runId;
  }

  it('runs to completion with one booking, its receipt in the ledger', async () => {
    const server = track(await startMcpHttpServer());
    const ctx = await bookingAgentCtx(server.url);
    opened.push({ close: () => ctx.close() });
    const runId = await createRun(ctx, 'R-1');
    await h.startWorker({}, ctx);
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('completed');
    const [action] = await new Ledger(h.ctx.redis, h.ctx.keys).listForRun(runId);
    expect(action).toMatchObject({ tool: 'book_slot', state: 'confirmed', receipt: 'bk_1' });
    expect(server.store.effects()).toEqual({ [action!.idempotencyKey]: 1 });
  });

  it('a server that changed book_slot under a pinned run: the run parks in the version queue, nothing booked', async () => {
    const v1 = track(await startMcpHttpServer());
    const v2 = track(await startMcpHttpServer({ toolsVersion: 2 }));
    const ctx1 = await bookingAgentCtx(v1.url);
    const ctx2 = await bookingAgentCtx(v2.url);
    opened.push({ close: () => ctx1.close() });
    expect(ctx2.agents.get('mcp-booking')!.tools.schemaHash).not.toBe(ctx1.agents.get('mcp-booking')!.tools.schemaHash);
    const runId = await createRun(ctx1, 'R-2');
    await h.startWorker({}, ctx2);
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('needs_human');
    expect(await h.ctx.redis.hget(h.ctx.keys.run(runId).run, 'reason')).toMatch(
      /^version_mismatch: pinned mcp-booking@1\//,
    );
    expect(v2.store.bookings).toEqual([]);
  });
});
