/**
 * Tools from Model Context Protocol servers, through the official SDK's client
 * (stdio or streamable HTTP). A server's tool becomes an agent's tool:
 *  - a read when the server marks it `readOnlyHint: true` or the agent lists it in `reads`;
 *  - a write only when the agent declares it in `writes`, with its service's reconcile strategy
 *    (default `none`: after an unknown outcome a person decides). Each write call carries the
 *    ledger's idempotency key and action id in the request's `_meta` (MCP_META), and the server
 *    may mark a same-key answer as a replay there;
 *  - any other tool of the server is left out (named in `skipped`): a tool that may write is never
 *    run as a read, which a recovery would call again.
 * The tools' argument schemas are the server's (zod's fromJSONSchema), so they count in the agent's
 * tools hash: a server that changes a tool sends runs pinned to the old hash to the version queue.
 * The listing is taken once, when the agents module builds the agents (a process's boot).
 */
// The SDK is loaded when a server is connected, not when the engine is imported: the processes of a fleet
// whose agents use no MCP server do not pay its start-up.
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { z } from 'zod';
import { defineReadTool, defineWriteTool, type ReconcileStrategy } from '../core/agent.js';
import { isAgentError, OutcomeUnknownError, RetryableError, TerminalError } from '../core/errors.js';
import type { DispatchReceipt, LookupRequest, LookupResult, Tool, ToolContext } from '../core/tool.js';

/** The `_meta` fields of a write call (request) and of its answer (result). */
export const MCP_META = {
  /** The ledger's idempotency key: the same key is the same effect; the server must enforce it. */
  idempotencyKey: 'durable-agent-fleet/idempotency-key',
  /** The ledger's action id (stable across retries and processes), for a server that stores an external id. */
  actionId: 'durable-agent-fleet/action-id',
  /** In a result: `true` when the server answered an earlier request with this key and created nothing. */
  replayed: 'durable-agent-fleet/replayed',
} as const;

/** How the server is reached: a command speaking MCP on its stdio, or a streamable HTTP endpoint. */
export type McpTransport =
  | { command: string; args?: string[]; env?: Record<string, string>; cwd?: string }
  | { url: string; headers?: Record<string, string> };

/** What a call answered, as the SDK returns it. */
export interface McpCallResult {
  content?: unknown;
  structuredContent?: unknown;
  isError?: boolean;
  _meta?: Record<string, unknown>;
}

/** Calls one of the server's tools (a lookup uses it to ask the server about an earlier call). */
export type McpCaller = (name: string, args: Record<string, unknown>, signal: AbortSignal) => Promise<McpCallResult>;

export interface McpWriteDeclaration {
  /** How the server settles a doubt (default `none`: a person decides). */
  reconcile?: ReconcileStrategy;
  /** Required by a `lookup` strategy: what the server holds for an earlier call (e.g. through a query tool). */
  lookup?(call: McpCaller, req: LookupRequest, ctx: ToolContext): Promise<LookupResult>;
  /** The arguments that identify the business action (default: all of them). */
  identity?(args: Record<string, unknown>): unknown;
  /** The server's record id in an answer (default: `structuredContent.id`, else the idempotency key). */
  receipt?(result: McpCallResult): string;
}

export interface McpToolsOptions {
  /** Tools the agent takes as writes, by the server's tool name. */
  writes?: Record<string, McpWriteDeclaration>;
  /** Tools the agent takes as reads although the server does not mark them read-only. */
  reads?: readonly string[];
  /** Per call (default 5000 ms); the run's deadline bounds it too. */
  timeoutMs?: number;
}

export interface McpServerConnection {
  /** The server's tools as the agent declared them (the order the server lists them in). */
  tools: Tool[];
  /** Server tools neither read-only nor declared: not given to the agent. */
  skipped: string[];
  close(): Promise<void>;
}

interface ListedTool {
  name: string;
  description?: string | undefined;
  inputSchema: Record<string, unknown>;
  annotations?: { readOnlyHint?: boolean | undefined } | undefined;
}

const ECONNREFUSED = /ECONNREFUSED/;

/** The text an MCP result carries, for the model (structured content when the server gives it). */
function outputOf(result: McpCallResult): unknown {
  if (result.structuredContent !== undefined) return result.structuredContent;
  const parts = Array.isArray(result.content) ? (result.content as { type?: string; text?: string }[]) : [];
  return parts.map((p) => (p.type === 'text' ? p.text : `[${p.type ?? 'content'}]`)).join('\n');
}

function defaultReceipt(result: McpCallResult, key: string): string {
  const id = (result.structuredContent as { id?: unknown } | undefined)?.id;
  return typeof id === 'string' && id.length > 0 ? id : key;
}

/** Whether the request certainly did not reach the server (nothing to reconcile). */
function neverSent(err: unknown): boolean {
  const cause = (err as { cause?: { code?: string } }).cause;
  return cause?.code === 'ECONNREFUSED' || ECONNREFUSED.test(String((err as Error).message));
}

async function transportOf(t: McpTransport): Promise<StdioClientTransport | StreamableHTTPClientTransport> {
  if ('url' in t) {
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    return new StreamableHTTPClientTransport(
      new URL(t.url),
      t.headers ? { requestInit: { headers: t.headers } } : undefined,
    );
  }
  const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
  // The server's stderr stays with it: its lines may carry customer text.
  return new StdioClientTransport({
    command: t.command,
    args: t.args ?? [],
    ...(t.env ? { env: t.env } : {}),
    ...(t.cwd ? { cwd: t.cwd } : {}),
    stderr: 'ignore',
  });
}

/**
 * Connects to an MCP server and lists its tools as the agent declares them.
 * A declared read or write the server does not list stops the boot (a TypeError naming it).
 *
 * @example
 *   const bookings = await connectMcpServer({ url: env.BOOKINGS_MCP_URL }, {
 *     writes: { book_slot: { reconcile: { kind: 'replay_same_key', windowMs: 86_400_000 } } },
 *   });
 *   defineAgent({ name: 'booker', version: 'booker@1', tools: bookings.tools, ... });
 */
export async function connectMcpServer(
  transport: McpTransport,
  opts: McpToolsOptions = {},
): Promise<McpServerConnection> {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const client = new Client({ name: 'durable-agent-fleet', version: '1' });
  await client.connect(await transportOf(transport));
  const listed: ListedTool[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    listed.push(...(page.tools as ListedTool[]));
    cursor = page.nextCursor;
  } while (cursor);
  const names = new Set(listed.map((t) => t.name));
  const missing = [...Object.keys(opts.writes ?? {}), ...(opts.reads ?? [])].filter((n) => !names.has(n));
  if (missing.length > 0) {
    await client.close();
    throw new TypeError(`MCP server does not list the declared tool(s) ${missing.join(', ')}`);
  }
  const call: McpCaller = async (name, args, signal) =>
    await client.callTool({ name, arguments: args }, undefined, { signal });
  const timeoutMs = opts.timeoutMs ?? 5000;
  const tools: Tool[] = [];
  const skipped: string[] = [];
  for (const t of listed) {
    const write = opts.writes?.[t.name];
    if (write) tools.push(mcpWriteTool(client, t, write, call, timeoutMs));
    else if (t.annotations?.readOnlyHint === true || opts.reads?.includes(t.name))
      tools.push(mcpReadTool(call, t, timeoutMs));
    else skipped.push(t.name);
  }
  return { tools, skipped, close: () => client.close() };
}

function argsOf(t: ListedTool): z.ZodType<Record<string, unknown>> {
  return z.fromJSONSchema(t.inputSchema) as z.ZodType<Record<string, unknown>>;
}

function mcpReadTool(call: McpCaller, t: ListedTool, timeoutMs: number): Tool {
  return defineReadTool({
    name: t.name,
    description: t.description ?? t.name,
    args: argsOf(t),
    timeoutMs,
    async execute(args, ctx) {
      let result: McpCallResult;
      try {
        result = await call(t.name, args, ctx.signal);
      } catch (err) {
        // A read has no effect to reconcile: the engine's retry wrapper may send it again.
        throw new RetryableError(`MCP read tool '${t.name}' failed`, undefined, {}, { cause: err });
      }
      // A tool error is the server's answer: the model sees it, as MCP intends.
      return result.isError ? { error: outputOf(result) } : outputOf(result);
    },
  });
}

function mcpWriteTool(
  client: Client,
  t: ListedTool,
  decl: McpWriteDeclaration,
  call: McpCaller,
  timeoutMs: number,
): Tool {
  return defineWriteTool({
    name: t.name,
    description: t.description ?? t.name,
    args: argsOf(t),
    timeoutMs,
    ...(decl.identity ? { identity: decl.identity } : {}),
    service: { enforcesKey: true, reconcile: decl.reconcile ?? 'none' },
    async dispatch(args, _ctx, req): Promise<DispatchReceipt> {
      const _meta = { [MCP_META.idempotencyKey]: req.idempotencyKey, [MCP_META.actionId]: req.actionId };
      let result: McpCallResult;
      try {
        result = await client.callTool({ name: t.name, arguments: args, _meta }, undefined, {
          signal: req.signal,
          timeout: req.timeoutMs,
        });
      } catch (err) {
        if (isAgentError(err)) throw err;
        if (neverSent(err))
          throw new RetryableError(`MCP server refused the connection for '${t.name}'`, undefined, {}, { cause: err });
        // Timeout, closed connection, reset: the call may have run on the server.
        throw new OutcomeUnknownError(`MCP write '${t.name}' has no answer`, { tool: t.name }, { cause: err });
      }
      // The server's own refusal (its tool error), with no text of it: it may hold customer data.
      if (result.isError) throw new TerminalError('invalid_input', `MCP server refused '${t.name}'`, { tool: t.name });
      const receipt = decl.receipt ? decl.receipt(result) : defaultReceipt(result, req.idempotencyKey);
      return { receipt, output: outputOf(result), replayed: result._meta?.[MCP_META.replayed] === true };
    },
    ...(decl.lookup ? { lookup: (ctx: ToolContext, req: LookupRequest) => decl.lookup!(call, req, ctx) } : {}),
  });
}
