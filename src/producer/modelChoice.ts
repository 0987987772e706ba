/**
 * Which model a run uses, decided once at intake and pinned in its spec (a
 * run's model never changes mid-run; the worker reads the pin, never the
 * configuration). In order, the first that applies:
 *
 *  1. the tenant's override for this agent, else the tenant's `*` (TENANT_MODELS):
 *     binding, so a request naming another provider for it is a 400;
 *  2. the provider the request names (`model` / `agent.model`): the agent's own choice
 *     when it names the same provider, else that provider's default model;
 *  3. the agent's choice (defineAgent `model`);
 *  4. the deployment's MODEL_PROVIDER with its default model.
 *
 * A choice that names no model id gets the provider's default (`defaultModel`).
 * checkModelChoices runs at boot on every process: a choice naming a provider
 * this process lacks stops it with the field named, instead of failing runs later.
 */
import type { Config } from '../config/config.js';
import { ConfigError } from '../core/errors.js';
import type { Agent, AgentCatalog } from '../core/agent.js';
import type { AgentModelChoice, ModelChoice, ModelProvider } from '../core/model.js';
import { enableHint } from '../core/providerNames.js';
import { ownValue } from '../core/ownValue.js';

type ModelConfig = Pick<Config, 'MODEL_PROVIDER' | 'TENANT_MODELS'>;

/** Where a choice came from: named in a 400 or a boot error. */
interface Sourced {
  choice: AgentModelChoice;
  /** The request field, or the configuration naming the choice. */
  field: string;
}

/**
 * A problem with the request's model (a 400 naming the field). `deployment`: where the choice came from and what
 * enables the provider, shown to the producer and operators only (src/producer/intake.ts, FieldProblem).
 */
export interface ModelProblem {
  path: string;
  message: string;
  deployment?: string;
}

export function tenantOverride(cfg: ModelConfig, tenant: string, agent: string): AgentModelChoice | undefined {
  const byAgent = ownValue(cfg.TENANT_MODELS, tenant);
  return byAgent && (ownValue(byAgent, agent) ?? ownValue(byAgent, '*'));
}

function pick(
  cfg: ModelConfig,
  agent: Agent,
  tenant: string,
  requested: string | undefined,
  requestField: string,
): Sourced | ModelProblem {
  const override = tenantOverride(cfg, tenant, agent.name);
  if (override) {
    if (requested !== undefined && requested !== override.provider) {
      return {
        path: requestField,
        message: `tenant '${tenant}' runs agent '${agent.name}' on provider '${override.provider}'; leave ${requestField} out or name that provider`,
        deployment: `from TENANT_MODELS.${tenant}`,
      };
    }
    return { choice: override, field: `TENANT_MODELS.${tenant}` };
  }
  if (requested !== undefined)
    return { choice: agent.model?.provider === requested ? agent.model : { provider: requested }, field: requestField };
  if (agent.model) return { choice: agent.model, field: `agent '${agent.name}' model` };
  return { choice: { provider: cfg.MODEL_PROVIDER }, field: 'MODEL_PROVIDER' };
}

/**
 * The pinned choice of a new run of `agent` for `tenant`, or the problem a 400 names.
 * @param requested the provider the request names, if any
 */
export function resolveModelChoice(
  cfg: ModelConfig,
  providers: ReadonlyMap<string, ModelProvider>,
  agent: Agent,
  tenant: string,
  requested: string | undefined,
  requestField: string,
): ModelChoice | ModelProblem {
  const picked = pick(cfg, agent, tenant, requested, requestField);
  if ('path' in picked) return picked;
  const { choice, field } = picked;
  const provider = providers.get(choice.provider);
  if (!provider)
    return {
      path: requestField,
      message: `provider '${choice.provider}' is not enabled`,
      deployment: `from ${field}; ${enableHint(choice.provider)}`,
    };
  const model = choice.model ?? provider.defaultModel;
  if (model === undefined)
    return {
      path: requestField,
      message: `provider '${choice.provider}' has no default model: name one`,
      deployment: `from ${field}`,
    };
  return { provider: choice.provider, model, ...(choice.options ? { options: choice.options } : {}) };
}

/**
 * Boot check: every agent's choice, every TENANT_MODELS entry and (for agents
 * without a choice) MODEL_PROVIDER name a provider this process has, with a
 * model id or a default one. A ConfigError naming the field otherwise.
 */
export function checkModelChoices(
  cfg: ModelConfig,
  agents: AgentCatalog,
  providers: ReadonlyMap<string, ModelProvider>,
): void {
  const check = (field: string, choice: AgentModelChoice) => {
    const provider = providers.get(choice.provider);
    if (!provider)
      throw new ConfigError(
        [field],
        `invalid configuration: ${field}: provider '${choice.provider}' is not enabled on this process: ${enableHint(choice.provider)}`,
      );
    if (choice.model === undefined && provider.defaultModel === undefined) {
      throw new ConfigError(
        [field],
        `invalid configuration: ${field}: provider '${choice.provider}' has no default model: name one`,
      );
    }
  };
  for (const agent of agents.all) {
    if (agent.model) check(`AGENTS_MODULE: agent '${agent.name}' model`, agent.model);
  }
  if (agents.all.some((a) => !a.model)) check('MODEL_PROVIDER', { provider: cfg.MODEL_PROVIDER });
  for (const [tenant, byAgent] of Object.entries(cfg.TENANT_MODELS)) {
    for (const [agent, choice] of Object.entries(byAgent)) {
      const field = `TENANT_MODELS.${tenant}.${agent}`;
      if (agent !== '*' && !agents.get(agent))
        throw new ConfigError(
          [field],
          `invalid configuration: ${field}: no agent '${agent}' in this deployment (${agents.names.join(', ')})`,
        );
      check(`${field}.provider`, choice);
    }
  }
}
