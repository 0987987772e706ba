/**
 * The shape of an agents module (AGENTS_MODULE), loaded by src/server/loadAgents.ts. Its default
 * export, or its `agents` export, is one of:
 *  - a list of agents;
 *  - a function of this context giving one, so a tool is built with its own service's settings;
 *  - a module made by defineAgentsModule: its own settings schema and that function.
 * A module's settings are its own: the engine's configuration names no vendor. The configuration
 * stage reads the environment once and hands the module only the names its schema declares; a
 * value that does not parse stops the process at boot with the field named (ConfigError).
 * Decision record 0012: docs/decisions/0012-an-agents-module-owns-its-settings.md.
 */
import { type z } from 'zod';
import type { Agent } from '../core/agent.js';
import { type Config } from './config.js';
import { ConfigError } from '../core/errors.js';

/** The process environment as the configuration stage read it, frozen (empty values are unset). */
export type Environment = Readonly<Record<string, string | undefined>>;

export interface AgentsModuleContext<S = Record<string, never>> {
  /** The deployment's frozen configuration. */
  config: Config;
  /** The module's settings, parsed by its schema (empty when it declares none). */
  settings: S;
  /**
   * The whole environment as the configuration stage read it.
   * @deprecated Declare a settings schema (defineAgentsModule): it is validated at boot and
   * the module sees only the names it declares.
   */
  env: Environment;
}

/**
 * A module's settings: a zod object over environment variable names (strings in, typed values
 * out), or a function of the deployment's configuration giving one (e.g. a credential that
 * production requires and development defaults).
 */
export type AgentSettingsSchema<T extends z.ZodObject = z.ZodObject> = T | ((ctx: { config: Config }) => T);

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AgentList = readonly Agent<any>[];

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AgentsExport<S = any> = AgentList | ((ctx: AgentsModuleContext<S>) => AgentList | Promise<AgentList>);

export interface AgentsModule<T extends z.ZodObject = z.ZodObject> {
  /** The module's own settings, validated at boot before `agents` runs. */
  settings: AgentSettingsSchema<T>;
  agents: (ctx: AgentsModuleContext<z.output<T>>) => AgentList | Promise<AgentList>;
}

const MODULE = Symbol.for('durable-agent-fleet.agentsModule');

/**
 * An agents module that declares its settings.
 * @example
 * export default defineAgentsModule({
 *   settings: z.object({ CRM_URL: z.string().url() }),
 *   agents: ({ settings }) => [leadQualifier({ baseUrl: settings.CRM_URL })],
 * });
 */
export function defineAgentsModule<T extends z.ZodObject>(module: AgentsModule<T>): AgentsModule<T> {
  return Object.freeze({ ...module, [MODULE]: true });
}

export function isAgentsModule(value: unknown): value is AgentsModule {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[MODULE] === true;
}

/**
 * Parses a module's settings from the environment. Only the names the schema declares are
 * handed to it, so an agent's code never sees the engine's secrets (tokens, model keys).
 * A value that does not parse is a ConfigError naming each field.
 */
export function parseAgentSettings<T extends z.ZodObject>(
  schema: AgentSettingsSchema<T>,
  config: Config,
  env: Environment,
): z.output<T> {
  const object = typeof schema === 'function' ? schema({ config }) : schema;
  const view: Record<string, string> = {};
  for (const name of Object.keys(object.shape)) {
    const value = env[name];
    if (value !== undefined && value !== '') view[name] = value;
  }
  const parsed = object.safeParse(view);
  if (parsed.success) return parsed.data;
  const fields = parsed.error.issues.map((i) => i.path.join('.'));
  const detail = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
  throw new ConfigError(
    fields,
    `invalid configuration: ${detail} (the agents module's settings, APP_MODE=${config.APP_MODE})`,
  );
}
