/**
 * The model choice at intake (src/producer/modelChoice.ts), with no Redis: which
 * choice wins, the provider's default model, and what a 400 names.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { AgentCatalog, defineAgent } from '../../src/core/agent.js';
import type { ModelProvider } from '../../src/core/model.js';
import { ConfigError } from '../../src/core/errors.js';
import { checkModelChoices, resolveModelChoice } from '../../src/producer/modelChoice.js';

const provider = (name: string, defaultModel?: string): ModelProvider => ({
  name,
  defaultModel,
  needsTranscript: false,
  complete: () => Promise.reject(new Error('not called')),
});
const providers = new Map([
  ['openai', provider('openai', 'gpt-default')],
  ['anthropic', provider('anthropic', 'claude-default')],
  ['bare', provider('bare')],
]);
const agent = (model?: Parameters<typeof defineAgent>[0]['model']) =>
  defineAgent({
    name: 'a',
    version: '1',
    input: z.object({}),
    tools: [],
    instructions: () => '',
    ...(model ? { model } : {}),
  });
const cfg = (TENANT_MODELS: Record<string, Record<string, { provider: string; model?: string }>> = {}) => ({
  MODEL_PROVIDER: 'openai' as const,
  TENANT_MODELS,
});

describe('resolveModelChoice', () => {
  const mine = agent({ provider: 'anthropic', model: 'claude-mine', options: { temperature: 0.3 } });

  it("the agent's choice, with its options; without one, MODEL_PROVIDER and its default model", () => {
    expect(resolveModelChoice(cfg(), providers, mine, 't', undefined, 'model')).toEqual({
      provider: 'anthropic',
      model: 'claude-mine',
      options: { temperature: 0.3 },
    });
    expect(resolveModelChoice(cfg(), providers, agent(), 't', undefined, 'model')).toEqual({
      provider: 'openai',
      model: 'gpt-default',
    });
    expect(resolveModelChoice(cfg(), providers, agent('anthropic'), 't', undefined, 'model')).toEqual({
      provider: 'anthropic',
      model: 'claude-default',
    });
  });

  it("a requested provider: the agent's own choice when it is that provider, else that provider's default", () => {
    expect(resolveModelChoice(cfg(), providers, mine, 't', 'anthropic', 'model')).toEqual({
      provider: 'anthropic',
      model: 'claude-mine',
      options: { temperature: 0.3 },
    });
    expect(resolveModelChoice(cfg(), providers, mine, 't', 'openai', 'model')).toEqual({
      provider: 'openai',
      model: 'gpt-default',
    });
  });

  it('the tenant\'s entry for the agent wins over its "*", both over the agent; binding against the request', () => {
    const c = cfg({
      t: { a: { provider: 'openai', model: 'gpt-t' }, '*': { provider: 'anthropic' } },
      u: { '*': { provider: 'openai' } },
    });
    expect(resolveModelChoice(c, providers, mine, 't', undefined, 'model')).toEqual({
      provider: 'openai',
      model: 'gpt-t',
    });
    expect(resolveModelChoice(c, providers, mine, 'u', 'openai', 'model')).toEqual({
      provider: 'openai',
      model: 'gpt-default',
    });
    expect(resolveModelChoice(c, providers, mine, 'other', undefined, 'model')).toMatchObject({ model: 'claude-mine' });
    expect(resolveModelChoice(c, providers, mine, 't', 'anthropic', 'agent.model')).toEqual({
      path: 'agent.model',
      message: expect.stringContaining("on provider 'openai'; leave agent.model out"),
      // Where the choice came from, for the producer only.
      deployment: 'from TENANT_MODELS.t',
    });
  });

  it('a provider this process lacks, or one without a default when none is named: the request field and the source named', () => {
    // The source and the setting are the deployment's: apart from the message, for the producer and operators.
    expect(resolveModelChoice(cfg(), providers, mine, 't', 'scripted', 'model')).toEqual({
      path: 'model',
      message: "provider 'scripted' is not enabled",
      deployment: expect.stringMatching(/^from model; the scripted model runs in APP_MODE=development only/),
    });
    expect(resolveModelChoice(cfg(), providers, agent('bare'), 't', undefined, 'model')).toEqual({
      path: 'model',
      message: "provider 'bare' has no default model: name one",
      deployment: "from agent 'a' model",
    });
    expect(
      resolveModelChoice(cfg(), providers, agent({ provider: 'bare', model: 'x-1' }), 't', undefined, 'model'),
    ).toEqual({ provider: 'bare', model: 'x-1' });
  });
});

describe('checkModelChoices (boot)', () => {
  const fields = (fn: () => void) => {
    try {
      fn();
    } catch (err) {
      if (err instanceof ConfigError) return err.fields;
      throw err;
    }
    return [];
  };
  it('names the agent or the TENANT_MODELS entry that cannot be served', () => {
    expect(
      fields(() =>
        checkModelChoices(cfg(), new AgentCatalog([agent({ provider: 'anthropic', model: 'c' })]), providers),
      ),
    ).toEqual([]);
    expect(fields(() => checkModelChoices(cfg(), new AgentCatalog([agent('mistral')]), providers))).toEqual([
      "AGENTS_MODULE: agent 'a' model",
    ]);
    expect(fields(() => checkModelChoices(cfg(), new AgentCatalog([agent('bare')]), providers))).toEqual([
      "AGENTS_MODULE: agent 'a' model",
    ]);
    expect(
      fields(() =>
        checkModelChoices(
          { ...cfg(), MODEL_PROVIDER: 'anthropic' },
          new AgentCatalog([agent()]),
          new Map([['openai', provider('openai', 'g')]]),
        ),
      ),
    ).toEqual(['MODEL_PROVIDER']);
    expect(
      fields(() =>
        checkModelChoices(cfg({ t: { '*': { provider: 'mistral' } } }), new AgentCatalog([agent()]), providers),
      ),
    ).toEqual(['TENANT_MODELS.t.*.provider']);
    expect(
      fields(() =>
        checkModelChoices(cfg({ t: { zeta: { provider: 'openai' } } }), new AgentCatalog([agent()]), providers),
      ),
    ).toEqual(['TENANT_MODELS.t.zeta']);
  });
});
