/**
 * The shape of an agents module (AGENTS_MODULE): its default export, or its
 * `agents` export, is a list of agents or a function of this context giving
 * one, so a tool is built with its own service's settings (base URLs, keys)
 * without the engine knowing them. Loaded by src/server/loadAgents.ts.
 */
import type { Agent } from '../core/agent.js';
import type { Config } from './config.js';

export interface AgentsModuleContext {
  /** The deployment's frozen configuration. */
  config: Config;
  /** The process environment, for settings of the agent's own services (e.g. ORDERS_URL). */
  env: Readonly<Record<string, string | undefined>>;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AgentsExport = readonly Agent<any>[] | ((ctx: AgentsModuleContext) => readonly Agent<any>[] | Promise<readonly Agent<any>[]>);
