/**
 * What an agent is, as the engine is given it: a value with a name, a version,
 * an input schema, instructions, tools, a model choice, a token estimate and
 * compensation rules. The engine never reads the input's fields: it stores the
 * input the schema accepted and hands it back to the agent's own functions.
 *
 *   defineReadTool / defineWriteTool -> ReadTool / WriteTool (src/core/tool.ts)
 *   defineAgent({ tools })           -> Agent, its tools in a ToolRegistry
 *   new AgentCatalog(agents)         -> what a process runs (by name)
 */
import type { z } from 'zod';
import { agentWithMarkedErrors } from './agentCode.js';
import { fingerprint } from './canonical.js';
import type { JournalEntry } from './journal.js';
import { agentModelChoiceSchema, type AgentModelChoice } from './model.js';
import { HARD_LIMITS } from './limits.js';
import { countTokens } from './tokens.js';
import type {
  ChildBudget,
  DispatchReceipt,
  DispatchRequest,
  LookupRequest,
  LookupResult,
  ReadTool,
  ReconcileMethod,
  ServiceCapabilities,
  Tool,
  ToolContext,
  WaitRequest,
  WaitTool,
  WriteTool,
} from './tool.js';
import { ToolRegistry } from './toolRegistry.js';
import { AGENT_NAME_FORMAT } from './agentName.js';
import type { RunStatus } from './status.js';

const DEFAULT_TOOL_TIMEOUT_MS = 5000;

export interface ReadToolDefinition<A> {
  name: string;
  description: string;
  args: z.ZodType<A>;
  execute(args: A, ctx: ToolContext): Promise<unknown>;
  /** Per attempt (default 5000 ms); the run's deadline bounds it too. */
  timeoutMs?: number;
  /** The largest output journalled (bytes of JSON; default 256 KiB): past it the call is a tool error. */
  maxOutputBytes?: number;
}

/**
 * How the service settles a doubt after a request that may have left the
 * process (src/ledger/reconcile.ts applies it):
 *  - `lookup` (or `{ kind: 'lookup' }`): the tool's `lookup` asks the service (by key, external id,
 *    metadata); "not found" alone is not "not sent";
 *  - `{ kind: 'replay_same_key', windowMs }`: inside the service's key window (from the action's
 *    first dispatch, recorded in the ledger) the identical request is re-sent with the same key and
 *    the service's answer is the outcome; past it, a person decides;
 *  - `none` (or `{ kind: 'none' }`): the service offers neither: a doubt goes to a person;
 *  - a list of methods: tried in that order on every round (lookup, then replay; or the reverse).
 */
export type ReconcileStrategy = 'lookup' | 'none' | { kind: 'none' } | ReconcileMethod | readonly ReconcileMethod[];

/** The strategy as the ordered list of methods the ledger applies (`none` is the empty list). */
export function reconcileMethods(s: ReconcileStrategy): ReconcileMethod[] {
  if (s === 'none') return [];
  if (s === 'lookup') return [{ kind: 'lookup' }];
  if (Array.isArray(s)) return [...(s as readonly ReconcileMethod[])];
  const one = s as ReconcileMethod | { kind: 'none' };
  return one.kind === 'none' ? [] : [one];
}

export interface WriteToolDefinition<A> {
  name: string;
  description: string;
  args: z.ZodType<A>;
  /** The arguments that identify the business action (default: all of them): the same identity is the same effect. */
  identity?(args: A): unknown;
  /** The fields an approver sees and the approval fingerprint covers (default: all arguments). */
  material?(args: A): unknown;
  service: {
    /** The service rejects or replays a second request with the same Idempotency-Key. */
    enforcesKey: boolean;
    reconcile: ReconcileStrategy;
  };
  /**
   * Sends the request with `req.idempotencyKey` (the service must enforce it).
   * If the process dies while it is in flight, the next owner reconciles (lookup, or a same-key
   * replay inside the window) before anything is sent again. Throw RetryableError when the request
   * certainly had no effect, OutcomeUnknownError when it may have (`details.reason: 'in_progress'`
   * when the service says the key is still being processed), KeyConflictError when the service
   * holds the key for another request.
   */
  dispatch(args: A, ctx: ToolContext, req: DispatchRequest): Promise<DispatchReceipt>;
  /**
   * What the service holds for an earlier request (by its key, the action id as external id, the args). Required by a
   * `lookup` strategy.
   */
  lookup?(ctx: ToolContext, req: LookupRequest): Promise<LookupResult>;
  timeoutMs?: number;
  /**
   * The largest output journalled (bytes of JSON; default 256 KiB). Past it the action stays confirmed (its receipt
   * is recorded) and the model sees `{ receipt, error: 'output_too_large', ... }` instead of the output.
   */
  maxOutputBytes?: number;
  /**
   * Run this write by itself when the model asks for several tools in one turn (the calls before it
   * finish first, those after it start after it). Default false: it runs at once with the others.
   */
  runsAlone?: boolean;
}

export interface WaitToolDefinition<A> {
  name: string;
  description: string;
  args: z.ZodType<A>;
  /**
   * What to wait for, from the call's arguments: `{ kind: 'sleep', forMs }` or `{ kind: 'sleep', untilMs }`, or
   * `{ kind: 'event', key, timeoutMs }`. Pure: it is called again if the step is redelivered before its commit.
   */
  wait(args: A, ctx: ToolContext): WaitRequest;
}

/**
 * A tool that parks the run until a time or an event: no worker is held meanwhile (the next step is a
 * delayed job), the wait survives worker and Redis restarts and is cancellable, and it counts against the
 * run's wall clock (see docs/agents-that-do-more.md).
 *
 * @example
 * const followUpLater = defineWaitTool({
 *   name: 'check_back_later',
 *   description: 'Sleep before checking the order again.',
 *   args: z.object({ hours: z.number().positive().max(72) }).strict(),
 *   wait: ({ hours }) => ({ kind: 'sleep', forMs: hours * 3600_000 }),
 * });
 */
export function defineWaitTool<A>(def: WaitToolDefinition<A>): WaitTool<A> {
  return {
    name: def.name,
    description: def.description,
    args: def.args,
    effect: 'wait',
    timeoutMs: DEFAULT_TOOL_TIMEOUT_MS,
    wait: def.wait,
  };
}

export interface AgentToolDefinition<A> {
  name: string;
  description: string;
  args: z.ZodType<A>;
  /** The agent the call runs (its name in this deployment's catalog). */
  agent: string;
  /** The child run's input, from the call's arguments (validated by the child agent's schema). Pure. */
  input(args: A): unknown;
  /** What the child may spend at most (default: all the parent has left); capped by what the parent has left. Pure. */
  budget?(args: A): ChildBudget;
  /**
   * The arguments that identify the hand-off (default: all of them, as a write tool's `identity`). The same hand-off
   * asked again in one run (the same identity, canonical JSON) starts no second child: it is answered from the first
   * one (its answer or its stop again, `deduplicated`), or waits for it while it is at work, so a child's effects are
   * never made twice because its parent asked twice. `false` for a child whose answer may change when asked again
   * (a read-only one): every call starts its own child. Pure.
   */
  identity?: ((args: A) => unknown) | false;
}

/**
 * A tool that hands work to another agent: the call starts a child run of `agent` (its own run id and journal,
 * the parent's tenant, a budget carved out of what the parent has left, its deadline no later than the parent's)
 * and parks the parent `waiting_child` until the child ends. The child's final answer is the call's result
 * (`{ childRunId, answer }`); a child that stopped (failed, budget_exceeded, cancelled, needs_human) is a tool
 * error the model sees, naming its status and reason. What the child spent is charged to the parent when it
 * resumes. Several agent-tool calls in one turn start a child each, at once, each with its share of what the parent
 * has left; the parent waits for all of them and its model gets each result in the order it asked. If the process
 * dies at any point, each child is started once: its run id derives from the parent's run, step and call (see
 * docs/agents-that-do-more.md). The same hand-off asked again in the run (same `identity`, default all arguments)
 * is answered from its first child, `deduplicated`, and starts none.
 *
 * @example
 * const refund = defineAgentTool({
 *   name: 'hand_to_refunds',
 *   description: 'Hand a refund to the refunds agent and get its answer.',
 *   args: z.object({ orderId: z.string(), amountCents: z.number().int().positive() }).strict(),
 *   agent: 'refunds',
 *   input: (a) => ({ orderId: a.orderId, amountCents: a.amountCents }),
 *   budget: () => ({ maxSteps: 5 }),
 * });
 */
export function defineAgentTool<A>(def: AgentToolDefinition<A>): WaitTool<A> {
  const { agent, input, budget, identity } = def;
  const tool = defineWaitTool({
    name: def.name,
    description: def.description,
    args: def.args,
    wait: (args) => ({ kind: 'child', agent, input: input(args), ...(budget ? { budget: budget(args) } : {}) }),
  });
  return { ...tool, startsChild: true, ...(identity !== undefined ? { identity } : {}) };
}

/** A tool's own output cap: a positive whole number of bytes (a TypeError naming the tool otherwise). */
function outputCap(tool: string, bytes: number): number {
  if (!Number.isSafeInteger(bytes) || bytes <= 0)
    throw new TypeError(`tool '${tool}': maxOutputBytes must be a positive whole number of bytes`);
  return bytes;
}

export function defineReadTool<A>(def: ReadToolDefinition<A>): ReadTool<A> {
  return {
    name: def.name,
    description: def.description,
    args: def.args,
    effect: 'read',
    timeoutMs: def.timeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS,
    ...(def.maxOutputBytes !== undefined ? { maxOutputBytes: outputCap(def.name, def.maxOutputBytes) } : {}),
    execute: def.execute,
  };
}

export function defineWriteTool<A>(def: WriteToolDefinition<A>): WriteTool<A> {
  const { enforcesKey } = def.service;
  const reconcile = reconcileMethods(def.service.reconcile);
  if (reconcile.some((m) => m.kind === 'lookup') && !def.lookup)
    throw new TypeError(`write tool '${def.name}': reconcile 'lookup' needs a lookup function`);
  const badWindow = reconcile.find(
    (m) => m.kind === 'replay_same_key' && !(Number.isFinite(m.windowMs) && m.windowMs > 0),
  );
  if (badWindow)
    throw new TypeError(
      `write tool '${def.name}': replay_same_key needs a positive windowMs (the service's key window)`,
    );
  const service: ServiceCapabilities = { enforcesKey, reconcile };
  return {
    name: def.name,
    description: def.description,
    args: def.args,
    effect: 'write',
    timeoutMs: def.timeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS,
    ...(def.maxOutputBytes !== undefined ? { maxOutputBytes: outputCap(def.name, def.maxOutputBytes) } : {}),
    service,
    dispatch: def.dispatch,
    ...(def.lookup ? { lookup: def.lookup } : {}),
    ...(def.identity ? { identity: def.identity } : {}),
    ...(def.material ? { material: def.material } : {}),
    ...(def.runsAlone ? { runsAlone: true } : {}),
  };
}

/** An effect an operator ordered compensated (from the human queue), as the agent's compensationFor sees it. */
export interface CompensableAction {
  actionId: string;
  tool: string;
  args: unknown;
  receipt?: string | undefined;
}

/** The write-tool call that compensates an action: a tool of the same agent and its arguments. */
export interface CompensationCall {
  tool: string;
  args: unknown;
}

/**
 * The run a follow-up continues (the subject's run before it), as the agent's followUp sees it.
 * Read when the follow-up's first model call is prepared: the previous run has then reached a
 * status other than queued or running (it may still be parked with a person).
 */
export interface PreviousRun<I = unknown> {
  runId: string;
  status: RunStatus;
  input: I;
  /** Its final answer, when it ended with one. */
  final?: string | undefined;
  /** Its journal: decisions, observations and statuses (operator entries left out). */
  journal: JournalEntry[];
  /** What that run was itself given of the runs before it (a chain of follow-ups), if anything. */
  earlier?: string | undefined;
}

/** How much of the earlier chain the default follow-up text keeps (the tail, in characters). */
export const FOLLOW_UP_EARLIER_MAX_CHARS = 8000;

/**
 * The default previous conversation of a follow-up: the earlier chain (its tail), then the previous
 * run's first message and its final answer (or the status it ended in). Customer text goes to the
 * model here, never to logs.
 */
export function defaultFollowUp<I>(previous: PreviousRun<I>, prompt: (input: I) => string): string {
  const earlier = previous.earlier ? previous.earlier.slice(-FOLLOW_UP_EARLIER_MAX_CHARS) : '';
  const answer = previous.final ?? `(no final answer: the run ended ${previous.status})`;
  return [
    'Earlier in this conversation:',
    ...(earlier ? [earlier] : []),
    `User: ${prompt(previous.input)}`,
    `Assistant: ${answer}`,
  ].join('\n');
}

export interface AgentDefinition<I> {
  /** Lowercase letters, digits, `_` or `-`; a run names its agent by it. */
  name: string;
  /** Pinned by every run: a run recovered under another version goes to a person. */
  version: string;
  /** The run input, validated at intake (a 400 naming the field; nothing written). */
  input: z.ZodType<I>;
  /** The order is part of the tools' schema hash: keep it. */
  tools: readonly Tool[];
  /**
   * The model runs of this agent use: `{ provider, model, options? }` (options: temperature, topP,
   * maxOutputTokens...; validated here), or a provider's name alone (its deployment default model).
   * Default: the deployment's MODEL_PROVIDER and its default model. A tenant may be given another
   * (TENANT_MODELS); the choice is pinned in each run's spec at intake.
   */
  model?: string | AgentModelChoice;
  /**
   * The agent's own default run budget, used when a request gives none: `maxCost` in µ$ (1e-6 USD; src/core/prices.ts),
   * a positive whole number. Above this deployment's LIMIT_MAX_COST (when set) the boot stops naming the agent;
   * without it, DEFAULT_MAX_COST applies. A request's `budget.maxCost` still wins, within LIMIT_MAX_COST.
   */
  budget?: AgentBudget;
  /** The system prompt for a run of this input. */
  instructions(input: I): string;
  /** The first user message (default: the input as JSON). */
  prompt?(input: I): string;
  /** The input's business key: the same tenant, agent and key is the same run (default: a digest of the input). */
  key?(input: I): string;
  /**
   * The input's search fields: what people know a run by besides its subject (a customer's email, an order id), as
   * `{ name: value }`. Computed once at intake and stored in the run's spec; each field indexes the run (GET
   * /v1/runs?field.<name>=, the console's search). At most SEARCH_FIELDS_MAX fields, names SEARCH_FIELD_NAME_FORMAT,
   * values 1 to SEARCH_VALUE_MAX_CHARS characters (an empty or absent value is left out). Pure.
   */
  search?(input: I): Readonly<Record<string, string | undefined>>;
  /**
   * Prompt tokens of instructions and input, for the budget pre-flight (default: instructions(input) and prompt(input),
   * by the tokenizer).
   */
  estimateInputTokens?(input: I): number;
  /**
   * The write-tool call that compensates `action` when an operator orders it,
   * or undefined: the action stays with a person. The call goes through the
   * effect ledger like any write (its own action id and idempotency key).
   */
  compensationFor?(action: CompensableAction, input: I): CompensationCall | undefined;
  /** Turns the scripted provider plays when a run brings no script (demo and tests; refused in production). */
  demoScript?(input: I): unknown;
  /**
   * The previous conversation a follow-up run's model sees, as text sent before this run's first
   * message (its tokens count in every budget estimate of the run). Called once per follow-up;
   * the engine stores the text with the run, so every step and every recovery sends the same.
   * Default: defaultFollowUp (the earlier chain, the previous first message and final answer).
   */
  followUp?(previous: PreviousRun<I>, input: I): string;
  /** Other ways in besides `POST /v1/runs {agent, input}`: a shorthand body field and signed webhooks. */
  intake?: AgentIntake<I>;
}

/**
 * A signed webhook that starts runs of one agent: `POST /webhooks/<name>`, the tenant from `?tenant=` or
 * `/webhooks/<name>/<tenant>`, signed with the tenant's WEBHOOK_SECRETS entry. The engine checks the signature over
 * the raw bytes and the body against `body` (a 400 naming the field), then asks `event` for the event and the run's
 * input. The event names the run (the same event twice is one run; a new event on the same subject is a follow-up),
 * so it must come only from what the signature covers: the body, never a header.
 */
export interface WebhookIntake<I, B = unknown> {
  /** One line for the API's description. */
  summary: string;
  /** The body as the sender sends it; strict, so an unknown field is a 400 naming it. */
  body: z.ZodType<B>;
  /**
   * The event's id (1 to 200 visible ASCII characters) and the run's input, from the parsed body and its raw bytes;
   * and, for an event a run may be waiting for (a reply to a question the run asked), `delivery`: the key of that
   * wait (1 to 200 characters, the key the agent's wait tool names) and the payload the waiting call gets. When a
   * wait of the tenant and agent holds the key, the payload resumes it (as `POST /v1/events` would, once) and no run starts;
   * otherwise the event starts its run as any other (a follow-up on its subject). Nothing is kept on the key.
   */
  event(body: B, raw: Buffer): WebhookEvent<I>;
}

/** What a webhook's event is: the run it starts, or the wait it resumes when one holds `delivery.key`. */
export interface WebhookEvent<I> {
  id: string;
  input: I;
  delivery?: { key: string; payload: unknown } | undefined;
}

export interface AgentIntake<I> {
  /**
   * A body field of `POST /v1/runs` that holds this agent's input without naming the agent:
   * `{ tenant, <field>: input, budget?, agent?: { model?, script? }, priority? }`. For producers that predate
   * named agents; errors about the input are named under the field.
   */
  shorthand?: string;
  /** Signed webhooks by name (the path segment after /webhooks/). */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  webhooks?: Readonly<Record<string, WebhookIntake<I, any>>>;
}

/** Fields of the named-agent body, which a shorthand field may not take. */
const RUN_REQUEST_FIELDS = new Set(['tenant', 'agent', 'input', 'budget', 'model', 'script', 'priority']);

/** The intake hooks checked at definition (a TypeError naming the agent: a module with a typo stops the boot). */
function intakeOf<I>(agent: string, intake: AgentIntake<I> | undefined): AgentIntake<I> | undefined {
  if (intake === undefined) return undefined;
  const { shorthand, webhooks } = intake;
  if (shorthand !== undefined && (!AGENT_NAME_FORMAT.test(shorthand) || RUN_REQUEST_FIELDS.has(shorthand)))
    throw new TypeError(
      `agent '${agent}': intake.shorthand '${shorthand}' must match ${AGENT_NAME_FORMAT} and not be a run field`,
    );
  for (const name of Object.keys(webhooks ?? {}))
    if (!AGENT_NAME_FORMAT.test(name))
      throw new TypeError(`agent '${agent}': webhook name '${name}' must match ${AGENT_NAME_FORMAT}`);
  return Object.freeze({ ...intake, ...(webhooks ? { webhooks: Object.freeze({ ...webhooks }) } : {}) });
}

/** The agent's model choice validated (a TypeError naming the field: an agent module with a typo stops the boot). */
function modelChoiceOf(agent: string, raw: unknown): AgentModelChoice | undefined {
  if (raw === undefined) return undefined;
  // A provider's name alone is the provider with its default model.
  const parsed = agentModelChoiceSchema.safeParse(typeof raw === 'string' ? { provider: raw } : raw);
  if (!parsed.success) {
    const detail = parsed.error.issues
      .map((i) => `${['model', ...i.path.map(String)].join('.')}: ${i.message}`)
      .join('; ');
    throw new TypeError(`agent '${agent}': ${detail}`);
  }
  return Object.freeze(parsed.data);
}

/** An agent's default run budget (AgentDefinition.budget). */
export interface AgentBudget {
  maxCost?: number;
}

/** The agent's budget validated (a TypeError naming the field: an agent module with a typo stops the boot). */
function budgetOf(agent: string, raw: AgentBudget | undefined): Readonly<AgentBudget> | undefined {
  if (raw === undefined) return undefined;
  const { maxCost, ...rest } = raw;
  const unknown = Object.keys(rest);
  if (unknown.length > 0) throw new TypeError(`agent '${agent}': budget.${unknown[0]} is not a budget of an agent`);
  if (maxCost !== undefined && !(Number.isSafeInteger(maxCost) && maxCost > 0 && maxCost <= HARD_LIMITS.maxCost))
    throw new TypeError(
      `agent '${agent}': budget.maxCost must be a whole number of µ$ from 1 to ${HARD_LIMITS.maxCost}`,
    );
  return Object.freeze({ ...(maxCost !== undefined ? { maxCost } : {}) });
}

/** An agent as the engine runs it (its input typed `unknown`: the engine never reads it). */
export interface Agent<I = unknown> {
  readonly name: string;
  readonly version: string;
  readonly input: z.ZodType<I>;
  readonly tools: ToolRegistry;
  readonly model?: AgentModelChoice | undefined;
  /** The agent's default run budget (applied at intake when a request gives none). */
  readonly budget?: Readonly<AgentBudget> | undefined;
  instructions(input: I): string;
  prompt(input: I): string;
  key(input: I): string;
  /** The input's search fields, validated (searchFieldsOf): `{}` for an agent that declares none. */
  search(input: I): SearchFields;
  estimateInputTokens(input: I): number;
  compensationFor?(action: CompensableAction, input: I): CompensationCall | undefined;
  demoScript?(input: I): unknown;
  followUp(previous: PreviousRun<I>, input: I): string;
  readonly intake?: AgentIntake<I> | undefined;
}

/**
 * An input estimate without the agent's texts: the input's serialized JSON by the tokenizer, plus 200 for the
 * instructions.
 */
export function defaultInputTokens(input: unknown): number {
  return countTokens(JSON.stringify(input) ?? '') + 200;
}

/** A run's search fields: name -> value (searchFieldsOf checked them). */
export type SearchFields = Readonly<Record<string, string>>;

export const SEARCH_FIELDS_MAX = 8;
export const SEARCH_FIELD_NAME_FORMAT = /^[a-z][a-zA-Z0-9_]{0,31}$/;
export const SEARCH_VALUE_MAX_CHARS = 200;

/** A search field the agent's `search(input)` returned out of bounds (intake answers 400 naming `search.<name>`). */
export class SearchFieldError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The fields of an agent's `search(input)` within bounds: names SEARCH_FIELD_NAME_FORMAT, at most SEARCH_FIELDS_MAX,
 * values strings of 1 to SEARCH_VALUE_MAX_CHARS characters (an empty or absent value is left out: an input without an
 * order id is not indexed under one). Anything else throws SearchFieldError naming the field.
 */
export function searchFieldsOf(agent: string, raw: unknown): SearchFields {
  if (raw === undefined) return {};
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    throw new SearchFieldError('search', `agent '${agent}': search(input) must return an object of strings`);
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(raw)) {
    if (!SEARCH_FIELD_NAME_FORMAT.test(name))
      throw new SearchFieldError(
        `search.${name.slice(0, 40)}`,
        `a search field's name must match ${SEARCH_FIELD_NAME_FORMAT}`,
      );
    if (value === undefined || value === '') continue;
    if (typeof value !== 'string' || value.length > SEARCH_VALUE_MAX_CHARS)
      throw new SearchFieldError(`search.${name}`, `a string of 1 to ${SEARCH_VALUE_MAX_CHARS} characters`);
    out[name] = value;
  }
  if (Object.keys(out).length > SEARCH_FIELDS_MAX)
    throw new SearchFieldError('search', `at most ${SEARCH_FIELDS_MAX} search fields`);
  return Object.freeze(out);
}

const AGENT = Symbol.for('durable-agent-fleet.agent');

export function defineAgent<I>(def: AgentDefinition<I>): Agent<I> {
  if (!AGENT_NAME_FORMAT.test(def.name))
    throw new TypeError(`agent name '${def.name}' must match ${AGENT_NAME_FORMAT}`);
  if (def.version.length === 0 || def.version.length > 100)
    throw new TypeError(`agent '${def.name}': version must be 1 to 100 characters`);
  const prompt = def.prompt ?? ((input: I) => JSON.stringify(input));
  const agent: Agent<I> = {
    name: def.name,
    version: def.version,
    input: def.input,
    tools: new ToolRegistry(def.tools),
    model: modelChoiceOf(def.name, def.model),
    ...(def.budget !== undefined ? { budget: budgetOf(def.name, def.budget) } : {}),
    instructions: def.instructions,
    prompt,
    key: def.key ?? ((input) => fingerprint(input).slice(0, 32)),
    search: (input: I) => searchFieldsOf(def.name, def.search?.(input)),
    // By default what the model is sent: the instructions and the first message, counted by the tokenizer.
    estimateInputTokens:
      def.estimateInputTokens ?? ((input: I) => countTokens(def.instructions(input)) + countTokens(prompt(input))),
    ...(def.compensationFor ? { compensationFor: def.compensationFor } : {}),
    ...(def.demoScript ? { demoScript: def.demoScript } : {}),
    followUp: def.followUp ?? ((previous: PreviousRun<I>) => defaultFollowUp(previous, prompt)),
    ...(def.intake ? { intake: intakeOf(def.name, def.intake) } : {}),
  };
  Object.defineProperty(agent, AGENT, { value: true });
  return Object.freeze(agent);
}

/** Whether `value` was made by defineAgent (loaded modules are checked with it). */
export function isAgent(value: unknown): value is Agent {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[AGENT] === true;
}

/**
 * The agents a process runs, by name; each as agentWithMarkedErrors makes it, so whatever its own code throws is
 * logged without its message (src/core/agentCode.ts).
 */
export class AgentCatalog {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  private readonly byName = new Map<string, Agent<any>>();
  private readonly byShorthand = new Map<string, Agent>();
  private readonly webhookByName = new Map<string, { agent: Agent; hook: WebhookIntake<unknown> }>();

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  constructor(agents: readonly Agent<any>[]) {
    for (const given of agents) {
      if (!isAgent(given)) throw new TypeError('an agent must be made by defineAgent');
      const a = agentWithMarkedErrors(given);
      if (this.byName.has(a.name)) throw new TypeError(`two agents are named '${a.name}'`);
      this.byName.set(a.name, a);
      this.addIntake(a);
    }
  }

  /** Each shorthand field and webhook name leads to one agent: two claiming one stop the boot. */
  private addIntake(a: Agent): void {
    const field = a.intake?.shorthand;
    if (field !== undefined) {
      const other = this.byShorthand.get(field);
      if (other) throw new TypeError(`agents '${other.name}' and '${a.name}' both take the shorthand '${field}'`);
      this.byShorthand.set(field, a);
    }
    for (const [name, hook] of Object.entries(a.intake?.webhooks ?? {})) {
      const other = this.webhookByName.get(name);
      if (other) throw new TypeError(`agents '${other.agent.name}' and '${a.name}' both take the webhook '${name}'`);
      this.webhookByName.set(name, { agent: a, hook });
    }
  }

  /** The agent whose shorthand field is `field`. */
  shorthand(field: string): Agent | undefined {
    return this.byShorthand.get(field);
  }

  /** The shorthand fields, in the order the agents were given. */
  get shorthandFields(): string[] {
    return [...this.byShorthand.keys()];
  }

  /** Every webhook of every agent, by name. */
  get webhooks(): ReadonlyMap<string, { agent: Agent; hook: WebhookIntake<unknown> }> {
    return this.webhookByName;
  }

  get(name: string): Agent | undefined {
    return this.byName.get(name);
  }

  get names(): string[] {
    return [...this.byName.keys()];
  }

  get all(): Agent[] {
    return [...this.byName.values()];
  }
}
