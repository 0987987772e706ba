/**
 * An example agent whose tools come from an MCP server (the test kit's booking
 * server, testkit/mcpServer.ts, or any server with the same tools): it finds a
 * slot and books it. book_slot is declared a write; the other tools the server
 * marks read-only are reads as they are.
 *
 *   AGENTS_MODULE=examples/mcp-booking/index.ts BOOKINGS_MCP_URL=http://127.0.0.1:4030/mcp npm run worker
 *
 * BOOKINGS_KEY_WINDOW_MS: how long the server answers a same-key call with the original booking.
 * Set, a doubt about a booking is settled by a same-key replay inside that window; unset (the
 * default), the server is not trusted to settle it and a person decides.
 */
import { z } from 'zod';
import { connectMcpServer, defineAgent, defineAgentsModule } from '../../src/index.js';

const requestSchema = z
  .object({ requestId: z.string().min(1).max(100), name: z.string().min(1).max(200), day: z.string().min(1) })
  .strict();
type BookingRequest = z.infer<typeof requestSchema>;

/** AGENTS_MODULE entry: the server's address and its key window are the module's own settings, validated at boot. */
export default defineAgentsModule({
  settings: z.object({
    /** The bookings MCP server (Streamable HTTP). */
    BOOKINGS_MCP_URL: z.url({ error: 'required (the bookings MCP server)' }),
    /** How long the server answers a same-key call with the original booking (0: never trusted to). */
    BOOKINGS_KEY_WINDOW_MS: z.coerce.number().int().nonnegative().default(0),
  }),
  agents: ({ settings }) => bookingAgents(settings.BOOKINGS_MCP_URL, settings.BOOKINGS_KEY_WINDOW_MS),
});

async function bookingAgents(url: string, windowMs: number) {
  const bookings = await connectMcpServer(
    { url },
    {
      writes: { book_slot: windowMs > 0 ? { reconcile: { kind: 'replay_same_key', windowMs } } : {} },
    },
  );
  return [
    defineAgent<BookingRequest>({
      name: 'mcp-booking',
      version: 'mcp-booking@1',
      input: requestSchema,
      tools: bookings.tools,
      instructions: () =>
        'You book appointments. Find an open slot on the requested day, book it, then confirm in one line.',
      prompt: (r) => `Book ${r.name} on ${r.day}.`,
      key: (r) => r.requestId,
      demoScript: (r) => bookingScript(r),
    }),
  ];
}

/** The turns a scripted model plays for a request: find a slot, book it, confirm. */
export function bookingScript(r: BookingRequest) {
  const usage = { promptTokens: 100, completionTokens: 10 };
  return [
    { toolCalls: [{ name: 'find_slots', args: { day: r.day } }], usage },
    { toolCalls: [{ name: 'book_slot', args: { slot: `${r.day}T09:00`, name: r.name } }], usage },
    { toolCalls: [], final: `Booked ${r.name} at 09:00.`, usage },
  ];
}
