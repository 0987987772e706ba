/**
 * The public surface (package.json "exports" "."): what a team needs to run
 * its own agent on the fleet.
 *
 *   defineReadTool / defineWriteTool  tools, each built with its own client and settings
 *   defineWaitTool / defineAgentTool  tools that park the run: a sleep, an event, a child run of another agent
 *   defineAgent                       name, version, input schema, instructions, tools, compensation
 *   createFleet                       api, worker and reconciler in one process
 *   AGENTS_MODULE=<module>            or: the stock processes load your agents by configuration
 *
 * See README "Public API" and examples/lead-qualifier.
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
export type { ToolCall, Usage } from './core/journal.js';
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
export { loadConfig, type Config } from './config/config.js';
export type { EngineContext } from './runs/engineContext.js';
export { createFleet, type Fleet, type FleetOptions } from './server/fleet.js';
