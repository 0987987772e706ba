/**
 * A local MCP server for tests and the crash-test kit: a small booking service
 * on the official SDK's server (McpServer), reachable over streamable HTTP
 * (startMcpHttpServer) or stdio (testkit/mcpStdioServer.ts).
 *
 *   find_slots   read-only: the open slots of a day
 *   book_slot    a write: one booking per idempotency key (request `_meta`, MCP_META); the same key
 *                answers the original booking with `_meta` replayed=true and creates nothing
 *   find_booking read-only: what the service holds for an idempotency key (a lookup)
 *
 * It counts bookings per key, so a duplicate is a number. `ignoreKeys` is the planted bug: every
 * call books again, whatever its key. `toolsVersion: 2` changes book_slot's schema (a party size).
 * `slowCalls` makes the first book_slot calls slow (an answer lost to a caller that gave up, or a
 * booking made after it gave up); `openCalls` counts the book_slot calls it has not finished.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';
import { MCP_META } from '../src/mcp/mcpTools.js';

export interface Booking {
  id: string;
  slot: string;
  name: string;
  key: string;
}

export interface BookingOptions {
  /** The planted bug: book on every call, ignoring the key. */
  ignoreKeys?: boolean;
  /** 2: book_slot takes a required partySize (a changed tool schema). */
  toolsVersion?: 1 | 2;
  /** Also list `count_effects` (read-only), for a test that reaches the server only over MCP. */
  inspect?: boolean;
  /**
   * The first `count` book_slot calls take `ms` before they answer: booked at once (`commit: 'before'`, the
   * answer comes late: lost to a caller that timed out first) or only at the end (`'after'`, a slow commit: the
   * booking lands after such a caller gave up).
   */
  slowCalls?: { count: number; ms: number; commit: 'before' | 'after' };
}

/** The service's state: one per server, shared by every MCP session. */
export class BookingStore {
  readonly bookings: Booking[] = [];
  /** book_slot calls received and not yet finished (a slow one is open until it has booked and answered). */
  openCalls = 0;
  private slowLeft: number;
  constructor(public options: BookingOptions = {}) {
    this.slowLeft = options.slowCalls?.count ?? 0;
  }

  /** Bookings per idempotency key (the effects the service counted). */
  effects(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const b of this.bookings) counts[b.key] = (counts[b.key] ?? 0) + 1;
    return counts;
  }

  book(slot: string, name: string, key: string): { booking: Booking; replayed: boolean } {
    const earlier = this.options.ignoreKeys ? undefined : this.bookings.find((b) => b.key === key);
    if (earlier) return { booking: earlier, replayed: true };
    const booking = { id: `bk_${this.bookings.length + 1}`, slot, name, key };
    this.bookings.push(booking);
    return { booking, replayed: false };
  }

  /** One book_slot call, slow while `slowCalls` has some left. */
  async call(slot: string, name: string, key: string): Promise<{ booking: Booking; replayed: boolean }> {
    const slow = this.slowLeft > 0 ? this.options.slowCalls : undefined;
    if (slow) this.slowLeft--;
    this.openCalls++;
    try {
      if (!slow) return this.book(slot, name, key);
      const early = slow.commit === 'before' ? this.book(slot, name, key) : undefined;
      await new Promise((r) => setTimeout(r, slow.ms)); // the slow tool's duration: what it does
      return early ?? this.book(slot, name, key);
    } finally {
      this.openCalls--;
    }
  }
}

const text = (value: unknown) => [{ type: 'text' as const, text: JSON.stringify(value) }];

/** The MCP server over a store (one per session or request; the store is what persists). */
export function bookingServer(store: BookingStore): McpServer {
  const server = new McpServer({ name: 'bookings', version: String(store.options.toolsVersion ?? 1) });
  server.registerTool(
    'find_slots',
    {
      description: 'Open slots of a day.',
      inputSchema: { day: z.string().min(1) },
      annotations: { readOnlyHint: true },
    },
    ({ day }) => ({
      content: text({ day, slots: ['09:00', '10:00'] }),
      structuredContent: { day, slots: ['09:00', '10:00'] },
    }),
  );

  const base = { slot: z.string().min(1), name: z.string().min(1) };
  const bookShape: Record<string, z.ZodType> =
    store.options.toolsVersion === 2 ? { ...base, partySize: z.number().int().positive() } : base;
  server.registerTool(
    'book_slot',
    {
      description: 'Book a slot for a customer.',
      inputSchema: bookShape,
      annotations: { readOnlyHint: false, idempotentHint: true },
    },
    async (args, extra) => {
      const key = extra._meta?.[MCP_META.idempotencyKey];
      if (typeof key !== 'string' || key.length === 0)
        return { isError: true, content: text({ error: 'idempotency_key_required' }) };
      const { booking, replayed } = await store.call(String(args.slot), String(args.name), key);
      return { content: text(booking), structuredContent: { ...booking }, _meta: { [MCP_META.replayed]: replayed } };
    },
  );

  server.registerTool(
    'find_booking',
    {
      description: 'The booking held for an idempotency key, if any.',
      inputSchema: { idempotencyKey: z.string().min(1) },
      annotations: { readOnlyHint: true },
    },
    ({ idempotencyKey }) => {
      const booking = store.bookings.find((b) => b.key === idempotencyKey);
      // Absent with no call open means never received; a slow call still open may yet book.
      const found = booking
        ? { status: 'committed', booking }
        : store.openCalls > 0
          ? { status: 'processing' }
          : { status: 'absent' };
      return { content: text(found), structuredContent: found };
    },
  );

  if (store.options.inspect) {
    server.registerTool(
      'count_effects',
      {
        description: 'Bookings per idempotency key.',
        annotations: { readOnlyHint: true },
      },
      () => ({ content: text(store.effects()), structuredContent: { effects: store.effects() } }),
    );
  }
  return server;
}

export interface McpHttpHandle {
  url: string;
  store: BookingStore;
  close(): Promise<void>;
}

/** The booking server over streamable HTTP (stateless: a server and a transport per request, one store). */
export async function startMcpHttpServer(options: BookingOptions = {}, port = 0): Promise<McpHttpHandle> {
  const store = new BookingStore(options);
  const http: Server = createServer((req, res) => {
    if (req.url !== '/mcp') return void res.writeHead(404).end();
    const server = bookingServer(store);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => void transport.close().then(() => server.close()));
    void server
      .connect(transport)
      .then(() => transport.handleRequest(req, res))
      .catch(() => {
        if (!res.headersSent) res.writeHead(500).end();
      });
  });
  await new Promise<void>((r) => http.listen(port, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`,
    store,
    close: () =>
      new Promise((r) => {
        http.closeAllConnections();
        http.close(() => r());
      }),
  };
}
