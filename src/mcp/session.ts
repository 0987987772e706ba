/**
 * One MCP server's connection, kept up: the SDK's client over its transport, re-established with capped
 * exponential backoff and jitter after it closes (a stdio server that died, a stream that ended), its state
 * readable as a ToolSource (health and metrics).
 *
 * A call while the connection is down is refused before anything is written: RetryableError
 * (`reason: 'not_connected'`), which the engine retries in code and the ledger knows was never sent. A request
 * that was written before the connection closed is another matter: the server may have run it (the SDK rejects
 * it `Connection closed`), and the caller treats it as an unknown outcome.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { jsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';
import { RetryableError } from '../core/errors.js';
import { connectFailed } from '../core/neverSent.js';
import type { RefusedTool, ToolSource, ToolSourceStatus } from '../core/toolSource.js';

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

/** Reconnection after a loss: the first wait, the longest (defaults 200 ms and 30 s), each with jitter. */
export interface McpReconnect {
  baseMs?: number;
  maxMs?: number;
}

/**
 * The SDK rejects a request with exactly this message when it has no transport to write it to (the client closed,
 * the stdio server's process gone): nothing was written. Pinned by test/integration/mcpTools.test.ts (a killed
 * stdio server).
 */
const NOT_CONNECTED = 'Not connected';

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

export class McpSession implements ToolSource {
  private client: Client | undefined;
  private closing = false;
  private downSince: number | undefined;
  private failures = 0;
  private reconnects = 0;
  private reconnectFailures = 0;
  private timer: NodeJS.Timeout | undefined;
  private name = 'mcp';
  refused: RefusedTool[] = [];

  constructor(
    private readonly transport: McpTransport,
    private readonly validator: jsonSchemaValidator,
    private readonly backoff: Required<McpReconnect>,
  ) {}

  /** The first connection: a failure stops the boot (thrown). */
  async open(): Promise<Client> {
    const client = await this.connect();
    this.name = `mcp:${client.getServerVersion()?.name ?? 'server'}`;
    return client;
  }

  status(): ToolSourceStatus {
    return {
      name: this.name,
      up: this.downSince === undefined,
      ownsProcess: 'command' in this.transport,
      ...(this.downSince !== undefined ? { downSince: this.downSince } : {}),
      reconnects: this.reconnects,
      reconnectFailures: this.reconnectFailures,
      refused: this.refused,
    };
  }

  /** One tool call, bounded by `timeoutMs` (the SDK's request timeout) and the signal. */
  async call(
    params: { name: string; arguments: Record<string, unknown>; _meta?: Record<string, unknown> },
    signal: AbortSignal,
    timeoutMs: number,
  ): Promise<McpCallResult> {
    // Down: the call waits for the reconnection, within its own timeout, before anything is written.
    if (!this.client && !this.closing) await this.upWithin(timeoutMs, signal);
    const client = this.client;
    if (!client) throw this.notConnected();
    try {
      const result = (await client.callTool(params, undefined, { signal, timeout: timeoutMs })) as McpCallResult;
      // A streamable HTTP server has no connection to lose: an answer is what says it is back.
      if ('url' in this.transport) this.downSince = undefined;
      return result;
    } catch (err) {
      if (err instanceof Error && err.message === NOT_CONNECTED) throw this.notConnected(err);
      if ('url' in this.transport && connectFailed(err)) this.downSince ??= Date.now();
      throw err;
    }
  }

  async close(): Promise<void> {
    this.closing = true;
    clearTimeout(this.timer);
    await this.client?.close();
  }

  private readonly waiters = new Set<() => void>();

  /** Resolves when the connection is back, after `ms`, or when the signal aborts, whichever is first. */
  private upWithin(ms: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
      this.waiters.add(done);
    });
  }

  private notConnected(cause?: unknown): RetryableError {
    return new RetryableError(
      `MCP server ${this.name} is not connected: nothing was sent`,
      undefined,
      { reason: 'not_connected', server: this.name },
      cause === undefined ? undefined : { cause },
    );
  }

  private async connect(): Promise<Client> {
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const client = new Client(
      { name: 'durable-agent-fleet', version: '1' },
      // The server's output schemas are checked by the same bounds and regex engine as its input schemas.
      { jsonSchemaValidator: this.validator },
    );
    // The SDK reports transport errors here; a lost connection comes as onclose.
    client.onerror = () => {};
    client.onclose = () => this.lost(client);
    await client.connect(await transportOf(this.transport));
    this.client = client;
    return client;
  }

  /** The connection closed without close(): down from now, reconnected with backoff. */
  private lost(client: Client): void {
    if (this.closing || client !== this.client) return;
    this.client = undefined;
    this.downSince ??= Date.now();
    this.schedule();
  }

  private schedule(): void {
    const ceiling = Math.min(this.backoff.maxMs, this.backoff.baseMs * 2 ** Math.min(this.failures, 20));
    const waitMs = ceiling / 2 + Math.random() * (ceiling / 2);
    this.timer = setTimeout(() => void this.reconnect(), waitMs);
    this.timer.unref();
  }

  private async reconnect(): Promise<void> {
    if (this.closing) return;
    try {
      const client = await this.connect();
      // Lists the tools again so the client knows their output schemas (the SDK checks answers against them).
      await client.listTools();
      if (this.closing) return void (await client.close());
      this.reconnects++;
      this.downSince = undefined;
      this.failures = 0;
      for (const w of [...this.waiters]) w();
    } catch {
      const half = this.client;
      this.client = undefined;
      await half?.close().catch(() => {});
      this.downSince ??= Date.now();
      this.failures++;
      this.reconnectFailures++;
      this.schedule();
    }
  }
}
