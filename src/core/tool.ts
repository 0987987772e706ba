/** The tool interface: a zod argument schema, an effect class and, for writes, the service's capabilities. */
import type { z } from 'zod';
import type { Context } from '@opentelemetry/api';
import type { ToolSource } from './toolSource.js';

export type EffectClass = 'read' | 'write' | 'wait';

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
  /** `effects`: how many business effects the service holds for the action, when it can tell. */
  | { status: 'committed'; receipt: string; output: unknown; evidence: unknown; effects?: number }
  | { status: 'processing'; evidence: unknown }
  /** Nothing found, and the service proves no request for it is still running: a same-key retry is safe. */
  | { status: 'absent_stopped'; evidence: unknown }
  /** Nothing found. Alone this proves nothing (a list may lag a create; a request may still land). */
  | { status: 'absent'; evidence: unknown }
  | { status: 'undecidable'; evidence: unknown };

/**
 * One way a service settles a doubt about a request that may have left:
 *  - `lookup`: ask it (by external id, by metadata, by key) through the tool's `lookup()`;
 *  - `replay_same_key`: re-send the identical request with the same Idempotency-Key; inside
 *    `windowMs` (counted from the action's first dispatch, recorded in its ledger entry) the
 *    service answers with the original result and creates nothing, so its answer is the outcome.
 *    Past the window a re-send could be a second effect: never done, a person decides.
 */
export type ReconcileMethod = { kind: 'lookup' } | { kind: 'replay_same_key'; windowMs: number };

export interface ServiceCapabilities {
  /** The service rejects or replays a second request with the same Idempotency-Key. */
  enforcesKey: boolean;
  /**
   * How the service settles a doubt, tried in this order on every round of a reconciliation
   * (e.g. look up by external id, then a same-key replay inside the key's window; or replay
   * first, then a lookup that still works past the window). Empty: it cannot (kind `none`):
   * a person decides.
   */
  reconcile: readonly ReconcileMethod[];
}

export interface DispatchRequest {
  /** The ledger's action id: a service that stores an external id or metadata gets this one. */
  actionId: string;
  idempotencyKey: string;
  requestId: string;
  timeoutMs: number;
  signal: AbortSignal;
}

export interface LookupRequest {
  actionId: string;
  idempotencyKey: string;
  requestId: string;
  /** The action's arguments as recorded (a lookup may need them: the parent resource to list). */
  args: unknown;
  timeoutMs: number;
  signal: AbortSignal;
}

interface ToolBase<A> {
  name: string;
  description: string;
  args: z.ZodType<A>;
  timeoutMs: number;
  /**
   * The largest output (bytes of JSON) the engine journals for a call (default DEFAULT_TOOL_OUTPUT_MAX_BYTES,
   * src/core/toolOutput.ts); past it the model sees `{ error: 'output_too_large', limitBytes, bytesAtLeast }`.
   */
  maxOutputBytes?: number;
  /** The connection its calls go through, when its process holds one (an MCP server): seen in health and metrics. */
  source?: ToolSource;
}

export interface ReadTool<A = unknown> extends ToolBase<A> {
  effect: 'read';
  execute(args: A, ctx: ToolContext): Promise<unknown>;
}

export interface WriteTool<A = unknown> extends ToolBase<A> {
  effect: 'write';
  service: ServiceCapabilities;
  /**
   * The call runs by itself when the model asks for several tools in one turn: the calls before it
   * finish first and those after it start after it (a service that serialises writes, an order that
   * matters). Default: it runs at once with the others, each call its own ledger action and key.
   */
  runsAlone?: boolean;
  /** The arguments that identify the business action (default: all of them). */
  identity?(args: A): unknown;
  /** The material fields an approver sees and the fingerprint covers (default: all arguments). */
  material?(args: A): unknown;
  /**
   * Sends the request. Throws RetryableError when it certainly had no effect, OutcomeUnknownError
   * when it may have (`details.reason: 'in_progress'` when the service says the same key is still
   * being processed), KeyConflictError when the service holds the key for another request, and an
   * AgentError `invalid_input` when the service refused it outright.
   */
  dispatch(args: A, ctx: ToolContext, req: DispatchRequest): Promise<DispatchReceipt>;
  /** Required when `service.reconcile` has a `lookup`. */
  lookup?(ctx: ToolContext, req: LookupRequest): Promise<LookupResult>;
}

/**
 * What a wait tool asks: sleep until a time (`untilMs`, epoch ms) or for a duration (`forMs`), or wait for an
 * event delivered on `key` (POST /v1/events, the run's tenant and agent; 1 to 200 visible ASCII characters, no spaces)
 * for at most `timeoutMs`.
 */
export type WaitRequest =
  | { kind: 'sleep'; untilMs: number }
  | { kind: 'sleep'; forMs: number }
  | { kind: 'event'; key: string; timeoutMs: number }
  | ChildRequest;

/** What a child run may spend at most: each is capped by what the parent has left (src/runs/children.ts). */
export interface ChildBudget {
  maxSteps?: number;
  maxTokens?: number;
  maxWallMs?: number;
  /** µ$ (1e-6 USD). */
  maxCost?: number;
}

/** An agent tool's call (defineAgentTool): a child run of `agent` with `input`, within `budget`. */
export interface ChildRequest {
  kind: 'child';
  agent: string;
  input: unknown;
  budget?: ChildBudget;
}

/**
 * A tool that parks the run: a sleep (status `sleeping`), a wait for an event (`waiting_event`) or for a child
 * run (`waiting_child`, defineAgentTool). No worker is held: the next step is a delayed job. Its result, seen by
 * the model on the next step: `{ sleptUntil }`, the event's `{ event: payload }`, `{ timedOut: true }`, or the
 * child's `{ childRunId, answer }` (a child that stopped is a tool error naming its status and reason).
 */
export interface WaitTool<A = unknown> extends ToolBase<A> {
  effect: 'wait';
  wait(args: A, ctx: ToolContext): WaitRequest;
  /** An agent tool (defineAgentTool): its call starts a child run, so the decision that asks is journalled first. */
  startsChild?: boolean;
  /**
   * An agent tool's hand-off identity (defineAgentTool `identity`): the arguments that name the hand-off (absent: all
   * of them). The same hand-off asked again in the run is answered from its first child, never a second one. `false`:
   * every call starts its own child.
   */
  identity?: ((args: A) => unknown) | false;
}

export type Tool = ReadTool<any> | WriteTool<any> | WaitTool<any>; // eslint-disable-line @typescript-eslint/no-explicit-any
