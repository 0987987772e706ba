/**
 * Loads the agents of a deployment (AGENTS_MODULE, src/config/agentsModule.ts).
 * Any failure (the module cannot be imported, exports neither a default nor
 * `agents`, the function throws, an entry was not made by defineAgent, two
 * agents share a name, none at all) is an AgentsModuleError naming
 * AGENTS_MODULE: the process stops at boot with that one line (src/server/boot.ts).
 */
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { AgentCatalog, isAgent, type Agent } from '../core/agent.js';
import type { Config } from '../config/config.js';
import { TerminalError } from '../core/errors.js';
import type { AgentsExport } from '../config/agentsModule.js';

/** AGENTS_MODULE cannot be loaded or exports no valid agents: the process does not start. */
export class AgentsModuleError extends TerminalError {
  constructor(module: string, problem: string, options?: ErrorOptions) {
    super('agents_module_invalid', `AGENTS_MODULE=${module}: ${problem}`, { module }, options);
  }
}

/** A path (`./agents/index.ts`, absolute) is resolved from the working directory; anything else is a package name. */
function specifierOf(module: string): string {
  const isPath = module.startsWith('.') || isAbsolute(module) || /\.[cm]?[jt]s$/.test(module);
  return isPath ? pathToFileURL(resolve(process.cwd(), module)).href : module;
}

export async function loadAgents(cfg: Config, env: Readonly<Record<string, string | undefined>> = process.env): Promise<AgentCatalog> {
  const module = cfg.AGENTS_MODULE ?? '(built-in src/agents/index.ts)';
  let loaded: Record<string, unknown>;
  try {
    loaded = cfg.AGENTS_MODULE === undefined
      ? ((await import('../agents/index.js')) as Record<string, unknown>)
      : ((await import(specifierOf(cfg.AGENTS_MODULE))) as Record<string, unknown>);
  } catch (err) {
    throw new AgentsModuleError(module, `cannot be loaded (${(err as Error).message ?? String(err)})`, { cause: err });
  }
  const exported = (loaded.default ?? loaded.agents) as AgentsExport | undefined;
  if (exported === undefined) throw new AgentsModuleError(module, 'exports neither a default nor `agents`');
  let list: unknown;
  try {
    list = typeof exported === 'function' ? await exported({ config: cfg, env }) : exported;
  } catch (err) {
    throw new AgentsModuleError(module, `its agents function failed (${(err as Error).message ?? String(err)})`, { cause: err });
  }
  if (!Array.isArray(list) || list.length === 0) throw new AgentsModuleError(module, 'exports no agent (a non-empty list, or a function returning one)');
  const bad = list.findIndex((a) => !isAgent(a));
  if (bad >= 0) throw new AgentsModuleError(module, `entry ${bad} was not made by defineAgent`);
  try {
    return new AgentCatalog(list as Agent[]);
  } catch (err) {
    throw new AgentsModuleError(module, (err as Error).message, { cause: err });
  }
}
