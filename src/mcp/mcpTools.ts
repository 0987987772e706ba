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
 * A server's schemas are untrusted: one out of bounds (its size, its nesting, a pattern RE2 cannot run) or one
 * zod cannot build, input or output schema, refuses its tool at the listing (src/mcp/schemaGuard.ts), and every
 * pattern of the server runs on RE2, in linear time.
 * The listing is taken once, when the agents module builds the agents (a process's boot); the connection
 * is re-established after a loss (src/mcp/session.ts).
 */
// The SDK is loaded when a server is connected, not when the engine is imported: the processes of a fleet
// whose agents use no MCP server do not pay its start-up.
import type { jsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';
import type { z } from 'zod';
import { defineReadTool, defineWriteTool, type ReconcileStrategy } from '../core/agent.js';
import { isAgentError, OutcomeUnknownError, RetryableError, TerminalError } from '../core/errors.js';
import { connectFailed } from '../core/neverSent.js';
import type { DispatchReceipt, LookupRequest, LookupResult, Tool, ToolContext } from '../core/tool.js';
import type { RefusedTool, ToolSourceStatus } from '../core/toolSource.js';
import {
  checkSchema,
  DEFAULT_SCHEMA_LIMITS,
  schemaToZod,
  type SchemaLimits,
  type SchemaRefusal,
} from './schemaGuard.js';
import { McpSession, type McpCallResult, type McpReconnect, type McpTransport } from './session.js';

export type { McpCallResult, McpReconnect, McpTransport } from './session.js';
export { DEFAULT_SCHEMA_LIMITS, type SchemaLimits } from './schemaGuard.js';

/** The `_meta` fields of a write call (request) and of its answer (result). */
export const MCP_META = {
  /** The ledger's idempotency key: the same key is the same effect; the server must enforce it. */
  idempotencyKey: 'durable-agent-fleet/idempotency-key',
  /** The ledger's action id (stable across retries and processes), for a server that stores an external id. */
  actionId: 'durable-agent-fleet/action-id',
  /** In a result: `true` when the server answered an earlier request with this key and created nothing. */
  replayed: 'durable-agent-fleet/replayed',
} as const;

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
  /** Per call (default 5000 ms): the SDK's request timeout; the run's deadline bounds it too. */
  timeoutMs?: number;
  /**
   * The largest output journalled per call, bytes of JSON (default 256 KiB, DEFAULT_TOOL_OUTPUT_MAX_BYTES): one
   * number for every tool of the server, or per tool name (`'*'`: the others).
   */
  maxOutputBytes?: number | Readonly<Record<string, number>>;
  /** Bounds of each tool's input and output schema (defaults: DEFAULT_SCHEMA_LIMITS). */
  schemaLimits?: Partial<SchemaLimits>;
  /** Reconnection after the connection is lost (defaults: 200 ms, at most 30 s). */
  reconnect?: McpReconnect;
}

/** A tool whose schema was refused, and why: `reason` a code, `message` a sentence (neither holds the schema). */
export interface RefusedMcpTool extends RefusedTool {
  message: string;
}

export interface McpServerConnection {
  /** The server's tools as the agent declared them (the order the server lists them in). */
  tools: Tool[];
  /** Server tools neither read-only nor declared: not given to the agent. */
  skipped: string[];
  /** Server tools whose input or output schema is refused (`mcp_schema_refused`): not given to the agent. */
  refused: RefusedMcpTool[];
  /** The connection's state (also every tool's `source`: the process's health and metrics read it). */
  status(): ToolSourceStatus;
  close(): Promise<void>;
}

/** A declared tool (in `writes` or `reads`) whose schema is refused: the boot stops, naming it and why. */
export class McpSchemaRefusedError extends TypeError {
  readonly code = 'mcp_schema_refused';
  constructor(readonly refused: readonly RefusedMcpTool[]) {
    super(`MCP tool schema refused: ${refused.map((r) => `'${r.tool}' (${r.reason}: ${r.message})`).join('; ')}`);
  }
}

interface ListedTool {
  name: string;
  description?: string | undefined;
  inputSchema: Record<string, unknown>;
  outputSchema?: Record<string, unknown> | undefined;
  annotations?: { readOnlyHint?: boolean | undefined } | undefined;
}

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

/** An output schema as the listing built it: its zod schema, or why it is refused. */
type BuiltOutput = { zod: z.ZodType } | SchemaRefusal;

/** The output schema within bounds, on RE2, built by zod; or why not (`schema_invalid`: zod cannot build it). */
function buildOutput(schema: unknown, limits: SchemaLimits): BuiltOutput {
  const checked = checkSchema(schema, limits);
  if ('reason' in checked) return checked;
  try {
    return { zod: schemaToZod(schema as Record<string, unknown>, checked.patterns) };
  } catch {
    return { reason: 'schema_invalid', message: 'zod cannot build the schema' };
  }
}

/**
 * The server's output schemas, for the SDK's check of a result's structured content: the same bounds and the same
 * regex engine as the input schemas. Each is built once, at the listing: the SDK asks for every listed tool's
 * validator as it takes the listing (`listTools`), and the tool's admission (`argsSchema`) reads the same build, by
 * the listing's own schema object. A tool whose output schema is refused (out of bounds, or one zod cannot build:
 * `unevaluatedProperties`, an unresolved `$ref`) is refused at the listing, never called as a tool; its validator
 * refuses every answer, naming why (a lookup's call of it, or a reconnection's listing that changed it).
 */
class OutputSchemas implements jsonSchemaValidator {
  private readonly built = new WeakMap<object, BuiltOutput>();

  constructor(private readonly limits: SchemaLimits) {}

  of(schema: unknown): BuiltOutput {
    if (typeof schema !== 'object' || schema === null) return buildOutput(schema, this.limits);
    let b = this.built.get(schema);
    if (!b) {
      b = buildOutput(schema, this.limits);
      this.built.set(schema, b);
    }
    return b;
  }

  // The SDK's port is generic in the validated type; this validator checks values, whatever T the caller names.
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters
  getValidator<T>(schema: unknown) {
    const b = this.of(schema);
    const invalid = (errorMessage: string) => ({ valid: false as const, data: undefined, errorMessage });
    if ('reason' in b) {
      const refusal = invalid(`the output schema is refused (${b.reason}: ${b.message})`);
      return () => refusal;
    }
    const { zod } = b;
    return (input: unknown) =>
      zod.safeParse(input).success
        ? { valid: true as const, data: input as T, errorMessage: undefined }
        : invalid('the structured content does not match its schema');
  }
}

/** The zod schema of a tool's arguments, or why its schemas (input or output) are refused. */
function argsSchema(
  t: ListedTool,
  limits: SchemaLimits,
  outputs: OutputSchemas,
): z.ZodType<Record<string, unknown>> | SchemaRefusal {
  if (t.outputSchema !== undefined) {
    const out = outputs.of(t.outputSchema);
    if ('reason' in out) return { reason: out.reason, message: `output schema: ${out.message}` };
  }
  const checked = checkSchema(t.inputSchema, limits);
  if ('reason' in checked) return checked;
  try {
    return schemaToZod(t.inputSchema, checked.patterns) as z.ZodType<Record<string, unknown>>;
  } catch {
    return { reason: 'schema_invalid', message: 'zod cannot build the schema' };
  }
}

/** A tool's output cap from the options, if they name one. */
function outputCapFor(opts: McpToolsOptions, tool: string): { maxOutputBytes?: number } {
  const o = opts.maxOutputBytes;
  const cap = typeof o === 'number' ? o : (o?.[tool] ?? o?.['*']);
  return cap === undefined ? {} : { maxOutputBytes: cap };
}

/**
 * Connects to an MCP server and lists its tools as the agent declares them.
 * A declared read or write the server does not list stops the boot (a TypeError naming it), and so does one whose
 * input or output schema is refused, out of bounds or one zod cannot build (McpSchemaRefusedError, naming it and
 * the reason); an undeclared read-only tool refused is left out, named in `refused`.
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
  const limits = { ...DEFAULT_SCHEMA_LIMITS, ...opts.schemaLimits };
  const outputs = new OutputSchemas(limits);
  const session = new McpSession(transport, outputs, {
    baseMs: opts.reconnect?.baseMs ?? 200,
    maxMs: opts.reconnect?.maxMs ?? 30_000,
  });
  const client = await session.open();
  const listed: ListedTool[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    listed.push(...(page.tools as ListedTool[]));
    cursor = page.nextCursor;
  } while (cursor);
  const names = new Set(listed.map((t) => t.name));
  const declared = [...Object.keys(opts.writes ?? {}), ...(opts.reads ?? [])];
  const missing = declared.filter((n) => !names.has(n));
  if (missing.length > 0) {
    await session.close();
    throw new TypeError(`MCP server does not list the declared tool(s) ${missing.join(', ')}`);
  }
  const timeoutMs = opts.timeoutMs ?? 5000;
  const tools: Tool[] = [];
  const skipped: string[] = [];
  const refused: RefusedMcpTool[] = [];
  for (const t of listed) {
    const write = opts.writes?.[t.name];
    if (!write && !(t.annotations?.readOnlyHint === true || opts.reads?.includes(t.name))) {
      skipped.push(t.name);
      continue;
    }
    const args = argsSchema(t, limits, outputs);
    if ('reason' in args) {
      refused.push({ tool: t.name, reason: args.reason, message: args.message });
      continue;
    }
    const parts = { session, t, args, timeoutMs, cap: outputCapFor(opts, t.name) };
    tools.push(write ? mcpWriteTool(parts, write) : mcpReadTool(parts));
  }
  session.refused = refused.map(({ tool, reason }) => ({ tool, reason }));
  const refusedDeclared = refused.filter((r) => declared.includes(r.tool));
  if (refusedDeclared.length > 0) {
    await session.close();
    throw new McpSchemaRefusedError(refusedDeclared);
  }
  return { tools, skipped, refused, status: () => session.status(), close: () => session.close() };
}

interface ToolParts {
  session: McpSession;
  t: ListedTool;
  args: z.ZodType<Record<string, unknown>>;
  timeoutMs: number;
  cap: { maxOutputBytes?: number };
}

function mcpReadTool({ session, t, args, timeoutMs, cap }: ToolParts): Tool {
  const tool = defineReadTool({
    name: t.name,
    description: t.description ?? t.name,
    args,
    timeoutMs,
    ...cap,
    async execute(a, ctx) {
      let result: McpCallResult;
      try {
        result = await session.call({ name: t.name, arguments: a }, ctx.signal, timeoutMs);
      } catch (err) {
        // A read has no effect to reconcile: the engine's retry wrapper may send it again.
        if (isAgentError(err)) throw err;
        throw new RetryableError(`MCP read tool '${t.name}' failed`, undefined, {}, { cause: err });
      }
      // A tool error is the server's answer: the model sees it, as MCP intends.
      return result.isError ? { error: outputOf(result) } : outputOf(result);
    },
  });
  return { ...tool, source: session };
}

function mcpWriteTool({ session, t, args, timeoutMs, cap }: ToolParts, decl: McpWriteDeclaration): Tool {
  const tool = defineWriteTool({
    name: t.name,
    description: t.description ?? t.name,
    args,
    timeoutMs,
    ...cap,
    ...(decl.identity ? { identity: decl.identity } : {}),
    service: { enforcesKey: true, reconcile: decl.reconcile ?? 'none' },
    async dispatch(a, _ctx, req): Promise<DispatchReceipt> {
      const _meta = { [MCP_META.idempotencyKey]: req.idempotencyKey, [MCP_META.actionId]: req.actionId };
      let result: McpCallResult;
      try {
        result = await session.call({ name: t.name, arguments: a, _meta }, req.signal, req.timeoutMs);
      } catch (err) {
        // Not connected (nothing written): the session's RetryableError, passed on as it is.
        if (isAgentError(err)) throw err;
        if (connectFailed(err))
          throw new RetryableError(`MCP server refused the connection for '${t.name}'`, undefined, {}, { cause: err });
        // Timeout, a connection closed after the request was written, reset: the call may have run on the server.
        throw new OutcomeUnknownError(`MCP write '${t.name}' has no answer`, { tool: t.name }, { cause: err });
      }
      // The server's own refusal (its tool error), with no text of it: it may hold customer data.
      if (result.isError) throw new TerminalError('invalid_input', `MCP server refused '${t.name}'`, { tool: t.name });
      const receipt = decl.receipt ? decl.receipt(result) : defaultReceipt(result, req.idempotencyKey);
      return { receipt, output: outputOf(result), replayed: result._meta?.[MCP_META.replayed] === true };
    },
    ...(decl.lookup
      ? {
          // The lookup's calls are bounded by the lookup's own timeout.
          lookup: (ctx: ToolContext, req: LookupRequest) =>
            decl.lookup!((name, a, signal) => session.call({ name, arguments: a }, signal, req.timeoutMs), req, ctx),
        }
      : {}),
  });
  return { ...tool, source: session };
}
