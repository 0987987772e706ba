/**
 * Loads the agents of a deployment (AGENTS_MODULE, src/config/agentsModule.ts).
 * Any failure (the module cannot be imported, exports neither a default nor
 * `agents`, the function throws, an entry was not made by defineAgent, two
 * agents share a name, none at all) is an AgentsModuleError naming
 * AGENTS_MODULE; settings that do not parse are a ConfigError naming the field:
 * the process stops at boot with that one line (src/server/boot.ts).
 */
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { AgentCatalog, isAgent, type Agent } from '../core/agent.js';
import { environmentOf, type Config } from '../config/config.js';
import { TerminalError } from '../core/errors.js';
import {
  isAgentsModule,
  parseAgentSettings,
  type AgentsExport,
  type AgentSettingsSchema,
  type Environment,
} from '../config/agentsModule.js';

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

async function importModule(cfg: Config, module: string): Promise<Record<string, unknown>> {
  try {
    return cfg.AGENTS_MODULE === undefined
      ? await import('../agents/index.js')
      : ((await import(specifierOf(cfg.AGENTS_MODULE))) as Record<string, unknown>);
  } catch (err) {
    throw new AgentsModuleError(module, `cannot be loaded (${(err as Error).message ?? String(err)})`, { cause: err });
  }
}

/**
 * The agents a module gives, with its settings parsed first: a defineAgentsModule value, or a
 * list or function beside an optional `settings` export.
 */
async function agentsOf(
  loaded: Record<string, unknown>,
  module: string,
  cfg: Config,
  env: Environment,
): Promise<unknown> {
  const exported = loaded.default ?? loaded.agents;
  if (exported === undefined) throw new AgentsModuleError(module, 'exports neither a default nor `agents`');
  const declared = isAgentsModule(exported)
    ? exported
    : { settings: loaded.settings as AgentSettingsSchema | undefined, agents: exported as AgentsExport };
  const settings = declared.settings === undefined ? {} : parseAgentSettings(declared.settings, cfg, env);
  if (typeof declared.agents !== 'function') return declared.agents;
  try {
    // The deprecated `env` is still handed to modules written before settings schemas, until they move.
    // eslint-disable-next-line @typescript-eslint/no-deprecated
    return await declared.agents({ config: cfg, settings, env });
  } catch (err) {
    throw new AgentsModuleError(module, `its agents function failed (${(err as Error).message ?? String(err)})`, {
      cause: err,
    });
  }
}

/**
 * `work`, or an AgentsModuleError once AGENTS_LOAD_TIMEOUT_MS passed. The timer also keeps the process alive: a
 * module whose top-level await or `agents` promise never settles is named, not left to Node's "unsettled top-level
 * await" exit naming the entry file.
 */
async function within<T>(cfg: Config, module: string, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const problem =
        `did not finish loading within AGENTS_LOAD_TIMEOUT_MS=${cfg.AGENTS_LOAD_TIMEOUT_MS} ` +
        '(its top-level code or its agents function never settled)';
      reject(new AgentsModuleError(module, problem));
    }, cfg.AGENTS_LOAD_TIMEOUT_MS);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** `env`: the environment the module's settings are read from (default: the one `cfg` was read from). */
export async function loadAgents(cfg: Config, env: Environment = environmentOf(cfg)): Promise<AgentCatalog> {
  const module = cfg.AGENTS_MODULE ?? '(built-in src/agents/index.ts)';
  const list = await within(
    cfg,
    module,
    importModule(cfg, module).then((loaded) => agentsOf(loaded, module, cfg, env)),
  );
  if (!Array.isArray(list) || list.length === 0)
    throw new AgentsModuleError(module, 'exports no agent (a non-empty list, or a function returning one)');
  const bad = list.findIndex((a) => !isAgent(a));
  if (bad >= 0) throw new AgentsModuleError(module, `entry ${bad} was not made by defineAgent`);
  try {
    return new AgentCatalog(list as Agent[]);
  } catch (err) {
    throw new AgentsModuleError(module, (err as Error).message, { cause: err });
  }
}
