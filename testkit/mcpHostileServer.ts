/**
 * An MCP server on stdio (the official SDK's low-level Server, so its schemas are raw JSON Schema) that tries
 * what a careless or hostile server could: `node --import tsx testkit/mcpHostileServer.ts`.
 *
 *   match        read-only; its argument's pattern is catastrophic for a backtracking engine (`^(a+)+$`)
 *   echo_match   read-only; its output schema has that pattern, and it answers structured content that trips it
 *   deep         read-only; anyOf nested 20 deep
 *   huge         read-only; a schema of about 1 MB
 *   sleep        read-only; answers after `ms` milliseconds
 *   blob         read-only; answers a text of `bytes` bytes
 *   pid          read-only; its process id (a test kills it)
 *   book         a write: one booking per idempotency key (MCP_META), counted (`count`)
 *   loose_out    read-only; its output schema has `unevaluatedProperties`, which zod cannot build
 *   ref_out      a write (not read-only); its output schema has a `$ref` to a definition it does not hold
 *   count        read-only; the bookings per key and the calls per tool the server received
 *
 * MCP_HOSTILE_TOOLS (comma-separated) lists only those tools. MCP_DOWN_FILE: while that file exists, the server
 * exits at start (a server that stays down). It exits when its client closes stdin.
 */
import { existsSync } from 'node:fs';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { MCP_META } from '../src/mcp/mcpTools.js';

if (process.env.MCP_DOWN_FILE && existsSync(process.env.MCP_DOWN_FILE)) process.exit(1);

export const CATASTROPHIC = '^(a+)+$';
const read = { readOnlyHint: true };
const obj = (properties: Record<string, unknown>, required: string[] = []) => ({
  type: 'object',
  properties,
  required,
});

function nestedAnyOf(depth: number): Record<string, unknown> {
  let s: Record<string, unknown> = { type: 'string' };
  for (let i = 0; i < depth; i++) s = { anyOf: [s, { type: 'number' }] };
  return s;
}

const hugeProps = Object.fromEntries(
  Array.from({ length: 8000 }, (_, i) => [`field_${i}`, { type: 'string', description: 'x'.repeat(100) }]),
);

const ALL = [
  { name: 'match', inputSchema: obj({ s: { type: 'string', pattern: CATASTROPHIC } }, ['s']), annotations: read },
  {
    name: 'echo_match',
    inputSchema: obj({ s: { type: 'string' } }, ['s']),
    outputSchema: obj({ s: { type: 'string', pattern: CATASTROPHIC } }, ['s']),
    annotations: read,
  },
  { name: 'deep', inputSchema: obj({ v: nestedAnyOf(20) }), annotations: read },
  { name: 'huge', inputSchema: obj(hugeProps), annotations: read },
  { name: 'sleep', inputSchema: obj({ ms: { type: 'integer' } }, ['ms']), annotations: read },
  { name: 'blob', inputSchema: obj({ bytes: { type: 'integer' } }, ['bytes']), annotations: read },
  { name: 'pid', inputSchema: obj({}), annotations: read },
  { name: 'book', inputSchema: obj({ slot: { type: 'string' } }, ['slot']), annotations: { readOnlyHint: false } },
  { name: 'count', inputSchema: obj({}), annotations: read },
  {
    name: 'loose_out',
    inputSchema: obj({}),
    outputSchema: { ...obj({ ok: { type: 'boolean' } }), unevaluatedProperties: false },
    annotations: read,
  },
  {
    name: 'ref_out',
    inputSchema: obj({ slot: { type: 'string' } }, ['slot']),
    outputSchema: obj({ id: { $ref: '#/$defs/bookingId' } }, ['id']),
    annotations: { readOnlyHint: false },
  },
];
const only = process.env.MCP_HOSTILE_TOOLS?.split(',');
const tools = only ? ALL.filter((t) => only.includes(t.name)) : ALL;

const bookings = new Map<string, number>();
const calls = new Map<string, number>();
const text = (value: unknown) => [
  { type: 'text' as const, text: typeof value === 'string' ? value : JSON.stringify(value) },
];

// The low-level Server, not McpServer: McpServer builds tool schemas from zod, and these must be served raw, hostile.
// eslint-disable-next-line @typescript-eslint/no-deprecated
const server = new Server({ name: 'hostile', version: '1' }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, () => ({ tools }));
server.setRequestHandler(CallToolRequestSchema, async (req) => {
  const args = req.params.arguments ?? {};
  calls.set(req.params.name, (calls.get(req.params.name) ?? 0) + 1);
  switch (req.params.name) {
    case 'match':
      return { content: text({ matched: args.s }) };
    case 'echo_match': {
      const s = `${'a'.repeat(34)}!`;
      return { content: text({ s }), structuredContent: { s } };
    }
    case 'sleep':
      await new Promise((r) => setTimeout(r, Number(args.ms))); // the tool's duration: what it does
      return { content: text({ slept: args.ms }) };
    case 'blob':
      return { content: text('x'.repeat(Number(args.bytes))) };
    case 'pid':
      return { content: text({ pid: process.pid }), structuredContent: { pid: process.pid } };
    case 'book': {
      const sent = req.params._meta?.[MCP_META.idempotencyKey];
      const key = typeof sent === 'string' ? sent : '';
      const n = bookings.get(key) ?? 0;
      if (n === 0) bookings.set(key, 1);
      return {
        content: text({ id: `bk_${key}` }),
        structuredContent: { id: `bk_${key}` },
        _meta: { [MCP_META.replayed]: n > 0 },
      };
    }
    case 'count':
      return {
        content: text(Object.fromEntries(bookings)),
        structuredContent: { bookings: Object.fromEntries(bookings), calls: Object.fromEntries(calls) },
      };
    case 'loose_out':
      return { content: text({ ok: true }), structuredContent: { ok: true } };
    case 'ref_out':
      return { content: text({ id: `bk_${String(args.slot)}` }), structuredContent: { id: `bk_${String(args.slot)}` } };
    default:
      return { isError: true, content: text({ error: 'unknown_tool' }) };
  }
});
await server.connect(new StdioServerTransport());
process.stdin.on('end', () => process.exit(0));
