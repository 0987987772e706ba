/**
 * Errors that come out of code an agent supplies, marked where the engine takes the agent in (AgentCatalog): its
 * tools' execute, dispatch, lookup, identity, material and wait (the MCP tools built for it among them), its hooks
 * (instructions, prompt, key, search, estimateInputTokens, compensationFor, demoScript, followUp) and its webhooks'
 * event; and, where the engine parses with them (agentSafeParse), its schemas' refinements and transforms. Such an error's message is the agent author's text, which quotes what the code had at hand (`no order 77 for
 * ada@example.com`), so a log line keeps its type, code, coded details and stack frames, never its message or its
 * causes' (src/metrics/log.ts). What the run keeps of it (the observation the model is shown, a ledger move's
 * evidence) is unchanged: the erasure handles stored text.
 * Decision record 0010: docs/decisions/0010-logs-never-carry-customer-text.md.
 */
import type { Tool } from './tool.js';
import { ToolRegistry } from './toolRegistry.js';

/** The errors thrown out of agent code (the objects themselves: the engine's checks on them are unchanged). */
const marked = new WeakSet();

/** A value that is not an object thrown by agent code (`throw 'no such order'`), as an error that can be marked. */
export class AgentThrewValue extends Error {
  constructor(readonly thrown: unknown) {
    super(String(thrown));
    this.name = 'AgentThrewValue';
  }
}

/** `err` marked as agent code's (the same object; a value that is not one wrapped in AgentThrewValue). */
export function markAgentError(err: unknown): unknown {
  if ((typeof err === 'object' && err !== null) || typeof err === 'function') {
    marked.add(err);
    return err;
  }
  const wrapped = new AgentThrewValue(err);
  marked.add(wrapped);
  return wrapped;
}

/** Whether `err` came out of agent code (markAgentError). */
export function isAgentCodeError(err: unknown): boolean {
  return ((typeof err === 'object' && err !== null) || typeof err === 'function') && marked.has(err);
}

/** `call()`, whatever it throws or rejects with marked as agent code's; a value returned as it is. */
export function fromAgentCode<T>(call: () => T): T {
  let out: T;
  try {
    out = call();
  } catch (err) {
    throw markAgentError(err);
  }
  if (isThenable(out))
    return out.then(undefined, (err: unknown) => {
      throw markAgentError(err);
    }) as T;
  return out;
}

/**
 * `schema.safeParse(value)` for a schema an agent supplies (its input, a tool's args, a webhook's body): a refinement
 * or transform that throws is the agent's code, its message the author's text quoting the value, so what it throws is
 * marked as agent code's; a value that does not parse is an answer, as it is. Every engine call site that parses with
 * an agent's schema goes through here (a Proxy round the schema would lose zod's registry entries, keyed by the
 * schema object, which the OpenAPI document reads).
 */
export function agentSafeParse<R>(schema: { safeParse(value: unknown): R }, value: unknown): R {
  return fromAgentCode(() => schema.safeParse(value));
}

function isThenable(v: unknown): v is PromiseLike<unknown> {
  return (
    ((typeof v === 'object' && v !== null) || typeof v === 'function') &&
    typeof (v as { then?: unknown }).then === 'function'
  );
}

/** The functions a tool supplies (of a tool made by a class, on its prototype too). */
const TOOL_FUNCTIONS = ['execute', 'dispatch', 'lookup', 'identity', 'material', 'wait'] as const;

/**
 * A copy of `obj` (its prototype and every own property, symbols included) whose functions among `names`, and its
 * own function properties, call the original's through fromAgentCode, with the original as `this`; read at each
 * call, so a function replaced on the original (a test's spy) is the one called.
 */
function withMarkedFunctions<T extends object>(obj: T, names: readonly string[] = []): T {
  const copy = Object.create(Object.getPrototypeOf(obj) as object | null) as Record<PropertyKey, unknown>;
  const source = obj as Record<PropertyKey, unknown>;
  const wrap = new Set<PropertyKey>(names.filter((n) => typeof source[n] === 'function'));
  for (const key of Reflect.ownKeys(obj)) {
    const d = Object.getOwnPropertyDescriptor(obj, key)!;
    if ('value' in d && typeof d.value === 'function') wrap.add(key);
    else Object.defineProperty(copy, key, { ...d, configurable: true });
  }
  for (const key of wrap)
    Object.defineProperty(copy, key, {
      value: (...args: unknown[]) =>
        fromAgentCode(() => (source[key] as (...a: unknown[]) => unknown).apply(obj, args)),
      enumerable: Object.getOwnPropertyDescriptor(obj, key)?.enumerable ?? true,
      writable: false,
      configurable: true,
    });
  return copy as T;
}

/** A tool whose functions mark what they throw (withMarkedFunctions). */
export function toolWithMarkedErrors<T extends Tool>(tool: T): T {
  return withMarkedFunctions(tool, TOOL_FUNCTIONS);
}

/** What agentWithMarkedErrors reads of an agent (src/core/agent.ts' Agent, which imports this module). */
interface AgentParts {
  readonly tools: ToolRegistry;
  readonly intake?: { readonly webhooks?: Readonly<Record<string, object>> | undefined } | undefined;
}

/**
 * The agent as the engine runs it: the same agent (its marker of defineAgent, its name, schemas, model and budget),
 * with its hooks, its tools' functions and its webhooks' `event` marking what they throw; frozen as defineAgent's.
 */
export function agentWithMarkedErrors<A extends AgentParts>(agent: A): A {
  const copy = withMarkedFunctions(agent) as Record<PropertyKey, unknown>;
  const tools = new ToolRegistry(agent.tools.tools.map((t) => toolWithMarkedErrors(t)));
  Object.defineProperty(copy, 'tools', { value: tools, enumerable: true, writable: false, configurable: true });
  if (agent.intake) {
    const webhooks = agent.intake.webhooks;
    const intake = {
      ...agent.intake,
      ...(webhooks
        ? {
            webhooks: Object.freeze(
              Object.fromEntries(
                Object.entries(webhooks).map(([name, hook]) => [name, withMarkedFunctions(hook, ['event'])]),
              ),
            ),
          }
        : {}),
    };
    Object.defineProperty(copy, 'intake', {
      value: Object.freeze(intake),
      enumerable: true,
      writable: false,
      configurable: true,
    });
  }
  return Object.freeze(copy) as A;
}
