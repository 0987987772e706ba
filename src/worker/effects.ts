/** What the step processor needs from the effect ledger (src/ledger) for write tools. */
import type { ToolCall } from '../core/journal.js';
import type { ToolContext, WriteTool } from '../core/tool.js';

export type EffectResult =
  | { kind: 'observed'; status: 'ok' | 'deduplicated' | 'tool_error' | 'rejected'; output: unknown; actionId: string }
  /** The run must stop at a waiting point: the action needs a person (approval or reconciliation). */
  | { kind: 'park'; status: 'needs_human' | 'waiting_approval'; reason: string; actionId: string };

/** One write tool call for the ledger to carry out. */
export interface EffectRequest {
  tool: WriteTool;
  args: unknown;
  call: ToolCall;
  ctx: ToolContext;
  tenant: string;
  /**
   * The run's wall-clock deadline (epoch ms): no dispatch starts past it (DeadlineError, the action stays as it is), a
   * dispatch waits at most until it, and reconciling it waits at most DEADLINE_MARGIN_MS more.
   */
  deadlineAt?: number;
  /**
   * The digest of the journalled decision that asked for the call (entryDigest): the action is planned only where
   * the run's journal holds that decision, so nothing leaves for a decision a failover took back.
   */
  decision?: string | undefined;
}

export interface EffectRunner {
  run(input: EffectRequest): Promise<EffectResult>;
  /**
   * The action this call (the run's step and call id) planned before, driven with the arguments it was recorded with;
   * undefined when it planned none. For a journalled call whose arguments the tool refuses today (its schema changed
   * since): a write that may have left is settled, never reported to the model as a format error.
   */
  resume?(input: Omit<EffectRequest, 'args'>): Promise<EffectResult | undefined>;
  /**
   * The settled outcome (confirmed, rejected) of the action this call planned; undefined when it planned none or its
   * action is not settled. For a journalled call whose tool is gone: the model is told what its write came to.
   */
  settledFor?(runId: string, step: number, callId: string, tool: string): Promise<EffectResult | undefined>;
}
