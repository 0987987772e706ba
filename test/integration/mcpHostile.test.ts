/**
 * MCP servers that misbehave, client and server both real (testkit/mcpHostileServer.ts over stdio): schemas out
 * of bounds are refused at the listing and named; a server whose process died refuses calls as never sent, is
 * reconnected with backoff and is visible while down; outputs past their cap are a tool error, never journalled;
 * the per-call timeout is applied.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createHarness, type Harness } from '../../testkit/harness.js';
import { until } from '../../testkit/until.js';
import {
  connectMcpServer,
  McpSchemaRefusedError,
  type McpServerConnection,
  type McpToolsOptions,
} from '../../src/mcp/mcpTools.js';
import { defineAgent, defineWriteTool, RetryableError, type ReadTool, type WriteTool } from '../../src/index.js';
import { createContext } from '../../src/server/buildContext.js';
import { buildSpec } from '../../src/producer/intake.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { scriptSchema } from '../../src/models/scriptedTurns.js';
import { reportToolSources, toolSourcesHealth, toolSourcesOf } from '../../src/server/toolSources.js';
import { AgentCatalog } from '../../src/core/agent.js';
import { moduleArgs } from '../../testkit/spawnModule.js';

const opened: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const c of opened.splice(0).reverse()) await c.close();
});

const env = Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined));
const hostile = (tools: string[], extra: Record<string, string> = {}) => ({
  command: process.execPath,
  args: moduleArgs('testkit/mcpHostileServer'),
  env: { ...env, MCP_HOSTILE_TOOLS: tools.join(','), ...extra },
});
async function connect(tools: string[], opts: McpToolsOptions = {}, extra: Record<string, string> = {}) {
  const conn = await connectMcpServer(hostile(tools, extra), opts);
  opened.push(conn);
  return conn;
}
const toolCtx = () => ({ runId: 'r1', step: 1, signal: new AbortController().signal, input: {} });
const req = (key: string) => ({
  actionId: `act-${key}`,
  idempotencyKey: key,
  requestId: `rq-${key}`,
  timeoutMs: 3000,
  signal: new AbortController().signal,
});
const readOf = (c: McpServerConnection, name: string) => c.tools.find((t) => t.name === name) as ReadTool;
const writeOf = (c: McpServerConnection, name: string) => c.tools.find((t) => t.name === name) as WriteTool;
/** One agent holding the connection's tools: what the tool-source health reads. */
const catalogOf = (c: McpServerConnection) =>
  new AgentCatalog([
    defineAgent({
      name: 'mcp-hostile',
      version: 'mcp-hostile@1',
      tools: c.tools,
      input: z.object({}),
      instructions: () => 'x',
      key: () => 'k',
    }),
  ]);

describe('schemas out of bounds', () => {
  it('deep nesting and a huge schema are refused and named; a catastrophic pattern runs on RE2', async () => {
    const conn = await connect(['match', 'deep', 'huge', 'echo_match']);
    expect(conn.refused.map((r) => [r.tool, r.reason])).toEqual([
      ['deep', 'combinators_too_deep'],
      ['huge', 'schema_too_large'],
    ]);
    expect(conn.status().refused).toEqual([
      { tool: 'deep', reason: 'combinators_too_deep' },
      { tool: 'huge', reason: 'schema_too_large' },
    ]);
    expect(conn.tools.map((t) => t.name)).toEqual(['match', 'echo_match']);
    const match = readOf(conn, 'match');
    // 34 a's and a '!': hours on a backtracking engine; RE2 answers at once.
    expect(match.args.safeParse({ s: `${'a'.repeat(34)}!` }).success).toBe(false);
    expect(match.args.safeParse({ s: 'aaaa' }).success).toBe(true);
    // The pattern is the server's, as the model is shown it (and as the tools hash covers it).
    expect(JSON.stringify(z.toJSONSchema(match.args))).toContain('"pattern":"^(a+)+$"');
    // The output schema's pattern too: the answer that trips it is refused, quickly.
    await expect(readOf(conn, 'echo_match').execute({ s: 'x' }, toolCtx())).rejects.toMatchObject({
      retry: 'retryable',
    });
  });

  it('a declared tool whose schema is refused stops the boot, naming the tool and the reason', async () => {
    const err = await connect(['deep', 'pid'], { reads: ['deep'] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(McpSchemaRefusedError);
    expect((err as McpSchemaRefusedError).code).toBe('mcp_schema_refused');
    expect((err as Error).message).toMatch(/'deep' \(combinators_too_deep/);
  });

  it('a declared tool whose output schema zod cannot build stops the boot, naming the tool and the reason', async () => {
    // A write: without the refusal, each call would run on the server and its answer fail the check (an unknown
    // outcome, a person); a read: a tool error every time. Neither with a cause anyone sees.
    const write = await connect(['ref_out', 'pid'], { writes: { ref_out: {} } }).catch((e: unknown) => e);
    expect(write).toBeInstanceOf(McpSchemaRefusedError);
    expect((write as McpSchemaRefusedError).refused).toEqual([
      { tool: 'ref_out', reason: 'schema_invalid', message: 'output schema: zod cannot build the schema' },
    ]);
    expect((write as Error).message).toMatch(/'ref_out' \(schema_invalid: output schema: zod cannot build/);
    const read = await connect(['loose_out', 'pid'], { reads: ['loose_out'] }).catch((e: unknown) => e);
    expect(read).toBeInstanceOf(McpSchemaRefusedError);
    expect((read as Error).message).toMatch(/'loose_out' \(schema_invalid: output schema/);
  });
});

describe('per-call timeout', () => {
  it('a read slower than timeoutMs fails at the timeout, not at the SDK default (60 s)', async () => {
    const conn = await connect(['sleep'], { timeoutMs: 300 });
    const err = await readOf(conn, 'sleep')
      .execute({ ms: 8000 }, toolCtx())
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ retry: 'retryable' });
    expect(String((err as Error).cause)).toMatch(/timed out/i);
  });
});

describe('a stdio server whose process dies', () => {
  let downFile: string;
  beforeEach(() => {
    downFile = join(tmpdir(), `mcp45-down-${process.pid}-${Date.now()}`);
  });
  afterEach(() => rmSync(downFile, { force: true }));

  it('calls are refused as never sent while it is down; it is reconnected with backoff, and seen down meanwhile', async () => {
    const conn = await connect(
      ['pid', 'book', 'count'],
      { writes: { book: {} }, reconnect: { baseMs: 50, maxMs: 200 } },
      { MCP_DOWN_FILE: downFile },
    );
    const pid = ((await readOf(conn, 'pid').execute({}, toolCtx())) as { pid: number }).pid;
    // It stays down: every start exits at once while the file exists.
    writeFileSync(downFile, '');
    process.kill(pid, 'SIGKILL');
    await until('the server seen down', 10_000, () => !conn.status().up);
    const catalog = catalogOf(conn);
    expect(toolSourcesHealth(toolSourcesOf(catalog)).down).toEqual(['mcp:hostile']);
    // A process-owned server down past the limit fails liveness.
    expect(toolSourcesHealth(toolSourcesOf(catalog), Date.now() + 61_000).alive).toBe(false);
    // Nothing written: a retry in code is safe, never an unknown outcome for a person.
    await expect(
      writeOf(conn, 'book').dispatch({ slot: 'mon' }, toolCtx(), { ...req('k-1'), timeoutMs: 300 }),
    ).rejects.toMatchObject({ retry: 'retryable', details: { reason: 'not_connected' } });
    await until('a failed reconnect', 60_000, () => conn.status().reconnectFailures >= 1);
    rmSync(downFile);
    await until('the server back', 60_000, () => conn.status().up);
    expect(conn.status().reconnects).toBe(1);
    expect(toolSourcesHealth(toolSourcesOf(catalog))).toEqual({ alive: true, down: [] });
    await expect(writeOf(conn, 'book').dispatch({ slot: 'mon' }, toolCtx(), req('k-1'))).resolves.toMatchObject({
      receipt: 'bk_k-1',
      replayed: false,
    });
    // Killed again: a call made at once waits for the reconnection (within its timeout) and is sent once.
    const pid2 = ((await readOf(conn, 'pid').execute({}, toolCtx())) as { pid: number }).pid;
    process.kill(pid2, 'SIGKILL');
    await until('the server seen down again', 10_000, () => !conn.status().up);
    await expect(
      writeOf(conn, 'book').dispatch({ slot: 'tue' }, toolCtx(), { ...req('k-2'), timeoutMs: 60_000 }),
    ).resolves.toMatchObject({ receipt: 'bk_k-2', replayed: false });
    expect(conn.status()).toMatchObject({ up: true, reconnects: 2 });
  });
});

describe('in a run', () => {
  let h: Harness;
  beforeEach(async () => {
    h = await createHarness('mcphostile', { RETRY_BASE_MS: '5', RETRY_MAX_MS: '20' });
  });
  afterEach(async () => {
    await h.close();
  });

  async function runWith(conn: McpServerConnection, script: unknown[]) {
    const agent = defineAgent({
      name: 'mcp-hostile',
      version: 'mcp-hostile@1',
      tools: conn.tools,
      input: z.object({ id: z.string() }).strict(),
      instructions: () => 'x',
      key: (r) => r.id,
    });
    const ctx = await createContext(h.cfg, 'mcphostile', { agents: [agent] });
    opened.push({ close: () => ctx.close() });
    const spec = buildSpec(
      ctx,
      {
        tenant: 'acme',
        agent: 'mcp-hostile',
        input: { id: 'R-1' },
        model: 'scripted',
        script: scriptSchema.parse(script),
      },
      Date.now(),
    );
    await ctx.store.create(spec, Date.now());
    await h.startWorker({}, ctx);
    return spec.runId;
  }
  const usage = { promptTokens: 10, completionTokens: 5 };

  it('an output past its cap is a tool error naming the cap; the output is never journalled', async () => {
    const conn = await connect(['blob'], { maxOutputBytes: { blob: 10_000 } });
    expect(readOf(conn, 'blob').maxOutputBytes).toBe(10_000);
    const runId = await runWith(conn, [
      { toolCalls: [{ name: 'blob', args: { bytes: 2_000_000 } }], usage },
      { toolCalls: [], final: 'done', usage },
    ]);
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('completed');
    const obs = (await h.ctx.store.transcript(runId)).find((e) => e.kind === 'observation');
    expect(obs).toMatchObject({ status: 'tool_error', output: { error: 'output_too_large', limitBytes: 10_000 } });
    expect(JSON.stringify(await h.ctx.store.transcript(runId)).length).toBeLessThan(10_000);
  });

  it('an undeclared tool whose output schema zod cannot build is left out and logged; a call of it is never sent', async () => {
    const conn = await connect(['loose_out', 'count']);
    expect(conn.refused).toEqual([
      { tool: 'loose_out', reason: 'schema_invalid', message: 'output schema: zod cannot build the schema' },
    ]);
    expect(conn.status().refused).toEqual([{ tool: 'loose_out', reason: 'schema_invalid' }]);
    expect(conn.tools.map((t) => t.name)).toEqual(['count']);
    // The worker's boot log names it (as for any refused schema).
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    const catalog = catalogOf(conn);
    reportToolSources(toolSourcesOf(catalog), new Registry(), pino(sink));
    expect(lines.map((l) => JSON.parse(l) as Record<string, unknown>)).toMatchObject([
      { code: 'mcp_schema_refused', source: 'mcp:hostile', tool: 'loose_out', reason: 'schema_invalid' },
    ]);
    // The model's call of it is answered unknown_tool by the engine; the server never receives it.
    const runId = await runWith(conn, [
      { toolCalls: [{ name: 'loose_out', args: {} }], usage },
      { toolCalls: [], final: 'done', usage },
    ]);
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('completed');
    const obs = (await h.ctx.store.transcript(runId)).filter((e) => e.kind === 'observation');
    expect(obs).toMatchObject([{ status: 'format_error', output: { error: 'unknown_tool', tool: 'loose_out' } }]);
    const counted = (await readOf(conn, 'count').execute({}, toolCtx())) as { calls: Record<string, number> };
    expect(counted.calls).toEqual({ count: 1 });
  });

  it('a write whose every attempt never left goes to safe_retry and is sent again by the job, not to a person', async () => {
    let calls = 0;
    const effects: string[] = [];
    const flaky = defineWriteTool({
      name: 'flaky_write',
      description: 'refused before sending, twice',
      args: z.object({ slot: z.string() }),
      service: { enforcesKey: true, reconcile: 'none' },
      async dispatch(_a, _ctx, r) {
        // Four attempts per dispatch (the send's retries): the first dispatch's all fail, then it goes through.
        if (++calls <= 4) throw new RetryableError('not connected', undefined, { reason: 'not_connected' });
        effects.push(r.idempotencyKey);
        return { receipt: `rc_${r.idempotencyKey}`, output: { ok: true }, replayed: false };
      },
    });
    const runId = await runWith({ tools: [flaky] } as unknown as McpServerConnection, [
      { toolCalls: [{ name: 'flaky_write', args: { slot: 'mon' } }], usage },
      { toolCalls: [], final: 'booked', usage },
    ]);
    expect(await h.waitForStatus(runId, ['completed', 'failed', 'needs_human'])).toBe('completed');
    const [action] = await new Ledger(h.ctx.redis, h.ctx.keys).listForRun(runId);
    expect(action).toMatchObject({ tool: 'flaky_write', state: 'confirmed', attempts: 2 });
    expect(effects).toEqual([action!.idempotencyKey]);
  });
});
