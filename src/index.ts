/**
 * `durable-agent-fleet`: what an agent author imports. An agent is a value: its tools (each built with its own
 * client and settings), its input schema, instructions and model choice. Nothing here runs anything: the stock
 * processes (`agent-fleet api|worker|reconciler --agents ./dist/agents.js`) or `durable-agent-fleet/fleet`
 * (createFleet) run the agents a module exports.
 *
 *   defineReadTool / defineWriteTool  tools, each built with its own client and settings
 *   defineWaitTool / defineAgentTool  tools that park the run: a sleep, an event, a child run of another agent
 *   defineAgent                       name, version, input schema, instructions, tools, compensation
 *   defineAgentsModule                an agents module that reads its own settings from the environment
 *   httpJson, errors                  a service call that says what a retry should do
 *
 * The other entries, by audience: `durable-agent-fleet/fleet` to embed and run a fleet, `durable-agent-fleet/client`
 * for producers and operators, `durable-agent-fleet/testkit` to crash-test your tools.
 *
 * @example
 * ```ts
 * import { z } from 'zod';
 * import { defineAgent, defineReadTool, httpJson } from 'durable-agent-fleet';
 *
 * const lookupOrder = defineReadTool({
 *   name: 'lookup_order',
 *   description: 'Where an order is.',
 *   args: z.object({ orderId: z.string() }).strict(),
 *   execute: async ({ orderId }, ctx) =>
 *     (await httpJson(`https://shop.example/orders/${orderId}`, { method: 'GET', timeoutMs: 3000, signal: ctx.signal })).body,
 * });
 *
 * export default [
 *   defineAgent<{ orderId: string }>({
 *     name: 'where-is-my-order',
 *     version: 'where-is-my-order@1',
 *     input: z.object({ orderId: z.string() }).strict(),
 *     tools: [lookupOrder],
 *     instructions: () => 'Look the order up and say where it is.',
 *     prompt: (o) => `Order ${o.orderId}`,
 *   }),
 * ];
 * ```
 */
export {
  defineAgent,
  defineReadTool,
  defineWriteTool,
  defineWaitTool,
  defineAgentTool,
  defaultInputTokens,
  isAgent,
  AgentCatalog,
  type Agent,
  type AgentDefinition,
  type ReadToolDefinition,
  type WriteToolDefinition,
  type WaitToolDefinition,
  type AgentToolDefinition,
  type ReconcileStrategy,
  type CompensableAction,
  type CompensationCall,
  type PreviousRun,
  type AgentIntake,
  type WebhookIntake,
  type WebhookEvent,
  defaultFollowUp,
} from './core/agent.js';
export { ToolRegistry } from './core/toolRegistry.js';
export type {
  ReadTool,
  WriteTool,
  WaitTool,
  WaitRequest,
  ChildRequest,
  ChildBudget,
  Tool,
  ToolContext,
  DispatchReceipt,
  DispatchRequest,
  LookupRequest,
  LookupResult,
  ReconcileMethod,
  ServiceCapabilities,
  EffectClass,
} from './core/tool.js';
export type {
  AgentModelChoice,
  ModelChoice,
  ModelOptions,
  ModelProvider,
  ModelRequest,
  ModelTurn,
  ToolSpec,
} from './core/model.js';
export type { ToolCall, TokenUsage } from './core/journal.js';
export {
  AgentError,
  TerminalError,
  RetryableError,
  KeyConflictError,
  isAgentError,
  isRetryable,
  isOutcomeUnknown,
  isKeyConflict,
  hasErrorCode,
  type ErrorCode,
} from './core/errors.js';
export {
  connectMcpServer,
  MCP_META,
  type McpTransport,
  type McpToolsOptions,
  type McpWriteDeclaration,
  type McpServerConnection,
  type McpCallResult,
  type McpCaller,
  type McpReconnect,
  McpSchemaRefusedError,
  DEFAULT_SCHEMA_LIMITS,
  type SchemaLimits,
} from './mcp/mcpTools.js';
export { DEFAULT_TOOL_OUTPUT_MAX_BYTES } from './core/toolOutput.js';
export { httpJson, OutcomeUnknownError, type HttpResult, type ServiceOptions } from './core/httpJson.js';
export { defineAgentsModule } from './config/agentsModule.js';
export type { AgentsExport, AgentsModule, AgentsModuleContext, AgentSettingsSchema } from './config/agentsModule.js';
