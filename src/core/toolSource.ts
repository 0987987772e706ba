/**
 * Where a tool's calls go when that is a connection its process holds (an MCP server): its state, for the
 * process's health and metrics. The engine reads it; the tool's builder (src/mcp) keeps it. A leaf module.
 */

/** One tool refused when its source was listed, with the reason code. */
export interface RefusedTool {
  tool: string;
  reason: string;
}

export interface ToolSourceStatus {
  /** `mcp:<server name>`: a metric label and a health field. */
  name: string;
  /** Calls can be sent now. */
  up: boolean;
  /** The source is a process this one started (a stdio server): a restart of this process starts it again. */
  ownsProcess: boolean;
  /** Epoch ms since which it is down (absent while up). */
  downSince?: number;
  /** Connections re-established after a loss, and attempts that failed. */
  reconnects: number;
  reconnectFailures: number;
  /** Tools the source listed that were not taken (their schema out of bounds), with why. */
  refused: readonly RefusedTool[];
}

export interface ToolSource {
  status(): ToolSourceStatus;
}
