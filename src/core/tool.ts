/** The tool interface: a zod argument schema, an effect class and, for writes, the service's capabilities. */
import type { z } from 'zod';
import type { Context } from '@opentelemetry/api';

export type EffectClass = 'read' | 'write';

/**
 * What the engine gives a tool at each call, and nothing domain-specific: a
 * tool's service client and configuration are given when it is built.
 */
export interface ToolContext {
  runId: string;
  step: number;
  signal: AbortSignal;
  /** OpenTelemetry context of the step's span (effect spans are its children); absent when tracing is off. */
  trace?: Context | undefined;
  /** The run's input as it was accepted at creation (unknown to the engine: a tool narrows it itself). */
  input: unknown;
}

/** What a write dispatch returned: the service's receipt (its record id) and the output the model sees. */
export interface DispatchReceipt {
  receipt: string;
  output: unknown;
  /** The service said it replayed an earlier request with this key (no new effect). */
  replayed: boolean;
}

/** What the authoritative service says about an earlier request (reconcile before retry). */
export type LookupResult =
  /** `effects`: how many business effects the service holds for the key, when it can tell. */
  | { status: 'committed'; receipt: string; output: unknown; evidence: unknown; effects?: number }
  | { status: 'processing'; evidence: unknown }
  | { status: 'absent_stopped'; evidence: unknown }
  | { status: 'undecidable'; evidence: unknown };

export interface ServiceCapabilities {
  /** The service rejects or replays a second request with the same Idempotency-Key. */
  enforcesKey: boolean;
  /** How the service can be asked what happened to a request. */
  lookup: 'key' | 'external_id' | 'none';
}

export interface DispatchRequest {
  idempotencyKey: string;
  requestId: string;
  timeoutMs: number;
  signal: AbortSignal;
}

interface ToolBase<A> {
  name: string;
  description: string;
  args: z.ZodType<A>;
  timeoutMs: number;
}

export interface ReadTool<A = unknown> extends ToolBase<A> {
  effect: 'read';
  execute(args: A, ctx: ToolContext): Promise<unknown>;
}

export interface WriteTool<A = unknown> extends ToolBase<A> {
  effect: 'write';
  service: ServiceCapabilities;
  /** The arguments that identify the business action (default: all of them). */
  identity?(args: A): unknown;
  /** The material fields an approver sees and the fingerprint covers (default: all arguments). */
  material?(args: A): unknown;
  dispatch(args: A, ctx: ToolContext, req: DispatchRequest): Promise<DispatchReceipt>;
  lookup(ctx: ToolContext, req: { idempotencyKey: string; requestId: string; signal: AbortSignal }): Promise<LookupResult>;
}

export type Tool = ReadTool<any> | WriteTool<any>; // eslint-disable-line @typescript-eslint/no-explicit-any
