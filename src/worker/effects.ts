/** What the step processor needs from the effect ledger (src/ledger) for write tools. */
import type { ToolCall } from '../journal/entries.js';
import type { ToolContext, WriteTool } from '../agent/tools/tool.js';

export type EffectResult =
  | { kind: 'observed'; status: 'ok' | 'deduplicated' | 'tool_error' | 'rejected'; output: unknown; actionId: string }
  /** The run must stop at a waiting point: the action needs a person (approval or reconciliation). */
  | { kind: 'park'; status: 'needs_human' | 'waiting_approval'; reason: string; actionId: string };

export interface EffectRunner {
  run(input: { tool: WriteTool; args: unknown; call: ToolCall; ctx: ToolContext; tenant: string }): Promise<EffectResult>;
}
