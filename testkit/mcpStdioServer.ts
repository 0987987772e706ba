/**
 * The test kit's booking MCP server on stdio (testkit/mcpServer.ts), one per
 * client that spawns it: `node --import tsx testkit/mcpStdioServer.ts`.
 * MCP_IGNORE_KEYS=1 plants the ignored-key bug, MCP_TOOLS_VERSION=2 changes
 * book_slot's schema, MCP_INSPECT=1 lists count_effects. It exits when its
 * client closes stdin.
 */
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { bookingServer, BookingStore } from './mcpServer.js';

const store = new BookingStore({
  ignoreKeys: process.env.MCP_IGNORE_KEYS === '1',
  toolsVersion: process.env.MCP_TOOLS_VERSION === '2' ? 2 : 1,
  inspect: process.env.MCP_INSPECT === '1',
});
await bookingServer(store).connect(new StdioServerTransport());
process.stdin.on('end', () => process.exit(0));
