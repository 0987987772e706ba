/**
 * The model chosen per agent and per tenant (src/producer/modelChoice.ts),
 * pinned in the run spec at intake and resolved by the worker: two agents on
 * different providers and models in one fleet, each run on its own local
 * server (testkit/modelServers) with the model id and options on the wire; a
 * tenant override routing one tenant's runs elsewhere; the pin outliving a
 * configuration change; specs pinned before model ids were; and the boot
 * refusing a choice it cannot serve, the field named.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent, defineReadTool } from '../../../src/index.js';
import { createFleet, type Fleet } from '../../../src/fleet.js';
import { fleetContext } from '../../../src/server/fleet.js';
import { loadConfig } from '../../../src/config/config.js';
import { ConfigError } from '../../../src/core/errors.js';
import { createContext } from '../../../src/server/buildContext.js';
import { buildSpec } from '../../../src/producer/intake.js';
import { createHarness, producerAuth, type Harness } from '../../../testkit/harness.js';
import { spawnModule } from '../../../testkit/spawnModule.js';
import { startOpenAIServer } from '../../../testkit/modelServers/openai.js';
import { startAnthropicServer } from '../../../testkit/modelServers/anthropic.js';
import type { ModelServer } from '../../../testkit/modelServers/queue.js';

const lookup = defineReadTool({
  name: 'lookup',
  description: 'Looks a word up.',
  args: z.object({ word: z.string() }),
  execute: async ({ word }) => ({ word, found: true }),
});
const input = z.object({ q: z.string().min(1) });
const alpha = defineAgent({
  name: 'alpha',
  version: '1',
  input,
  tools: [lookup],
  model: { provider: 'openai-compatible', model: 'llama-alpha', options: { temperature: 0.1, maxOutputTokens: 64 } },
  instructions: () => 'You are alpha.',
});
const beta = defineAgent({
  name: 'beta',
  version: '1',
  input,
  tools: [lookup],
  model: { provider: 'anthropic', model: 'claude-beta' },
  instructions: () => 'You are beta.',
});

/** globex's alpha runs on OpenAI with its own model; initech's runs of any agent on OpenAI's default model. */
const TENANT_MODELS = {
  globex: { alpha: { provider: 'openai', model: 'gpt-tenant', options: { temperature: 0 } } },
  initech: { '*': { provider: 'openai' } },
};

let h: Harness;
let fleet: Fleet;
let api: string;
let compat: ModelServer;
let anthropic: ModelServer;
let openai: ModelServer;

function modelEnv(): Record<string, string> {
  return {
    OPENAI_BASE_URL: `${openai.url}/v1`,
    OPENAI_API_KEY: 'sk-test',
    OPENAI_MODEL: 'gpt-default',
    ANTHROPIC_BASE_URL: `${anthropic.url}/v1`,
    ANTHROPIC_API_KEY: 'ak-test',
    ANTHROPIC_MODEL: 'claude-default',
    OPENAI_COMPATIBLE_BASE_URL: `${compat.url}/v1`,
    OPENAI_COMPATIBLE_MODEL: 'llama-default',
  };
}

beforeAll(async () => {
  [compat, anthropic, openai] = await Promise.all([startOpenAIServer(), startAnthropicServer(), startOpenAIServer()]);
  h = await createHarness('choice');
  fleet = await createFleet({
    agents: [alpha, beta],
    config: { ...h.env, ...modelEnv(), TENANT_MODELS: JSON.stringify(TENANT_MODELS) },
  });
  api = (await fleet.api.listen(0, '127.0.0.1')).url;
  fleet.worker.start();
});
afterAll(async () => {
  await fleet.close();
  await h.close();
  await Promise.all([compat, anthropic, openai].map((s) => s.close()));
});

async function post(
  body: object,
): Promise<{ status: number; body: { runId?: string; fields?: { path: string; message: string }[] } }> {
  const res = await fetch(`${api}/v1/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...producerAuth },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as { runId?: string } };
}

async function run(tenant: string, agent: string, q: string, extra: object = {}): Promise<string> {
  const res = await post({ tenant, agent, input: { q }, ...extra });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  const runId = res.body.runId!;
  expect(await h.waitForStatus(runId, ['completed', 'failed', 'budget_exceeded', 'needs_human'])).toBe('completed');
  return runId;
}

async function view(runId: string): Promise<{ agent: { model: string; modelId?: string; modelOptions?: object } }> {
  const res = await fetch(`${api}/v1/runs/${runId}`, { headers: producerAuth });
  expect(res.status).toBe(200);
  return (await res.json()) as { agent: { model: string; modelId?: string; modelOptions?: object } };
}

/** What each server was asked since `since`, as (model, temperature, completion cap) per request. */
const asked = (s: ModelServer, since: number) =>
  s.requests.slice(since).map((r) => ({
    model: r.body.model,
    temperature: r.body.temperature,
    cap: r.body.max_tokens ?? r.body.max_completion_tokens,
  }));

describe('a model per agent, in one fleet', () => {
  it('runs each agent on its own provider and model: each server gets its own runs, the model id and options on the wire', async () => {
    const before = [compat, anthropic, openai].map((s) => s.requests.length) as [number, number, number];
    // The first turn calls a tool, so each run asks its server twice (the second request carries the transcript).
    compat.enqueue({
      kind: 'turn',
      toolCalls: [{ name: 'lookup', args: { word: 'a' } }],
      usage: { input: 20, output: 5 },
    });
    anthropic.enqueue({
      kind: 'turn',
      toolCalls: [{ name: 'lookup', args: { word: 'b' } }],
      usage: { input: 20, output: 5 },
    });
    const [a1, b1, a2, b2] = await Promise.all([
      run('acme', 'alpha', 'one'),
      run('acme', 'beta', 'one'),
      run('acme', 'alpha', 'two'),
      run('acme', 'beta', 'two'),
    ]);
    // Two runs per agent, three requests per server: the tool turn, then each run's final turn.
    expect(asked(compat, before[0])).toEqual(Array(3).fill({ model: 'llama-alpha', temperature: 0.1, cap: 64 }));
    expect(asked(anthropic, before[1])).toEqual(
      Array(3).fill({ model: 'claude-beta', temperature: undefined, cap: h.cfg.COMPLETION_TOKEN_CAP }),
    );
    expect(openai.requests.length - before[2]).toBe(0);
    // The pinned choice is in the run's view.
    for (const id of [a1, a2])
      expect((await view(id)).agent).toMatchObject({
        model: 'openai-compatible',
        modelId: 'llama-alpha',
        modelOptions: { temperature: 0.1, maxOutputTokens: 64 },
      });
    for (const id of [b1, b2])
      expect((await view(id)).agent).toMatchObject({ model: 'anthropic', modelId: 'claude-beta' });
    // The journal names the provider of each decision.
    const decisions = (await h.ctx.store.transcript(a1)).filter((e) => e.kind === 'decision');
    expect(decisions.map((d) => (d as { model: string }).model)).toEqual(['openai-compatible', 'openai-compatible']);
  });

  it("a request naming another provider gets that provider's default model (the agent's options stay with the agent's provider)", async () => {
    const before = openai.requests.length;
    const runId = await run('acme', 'alpha', 'three', { model: 'openai' });
    expect(asked(openai, before)).toEqual([
      { model: 'gpt-default', temperature: undefined, cap: h.cfg.COMPLETION_TOKEN_CAP },
    ]);
    expect((await view(runId)).agent).toEqual(expect.objectContaining({ model: 'openai', modelId: 'gpt-default' }));
    expect((await view(runId)).agent.modelOptions).toBeUndefined();
  });
});

describe('a model per tenant (TENANT_MODELS)', () => {
  it("routes one tenant's runs of an agent to another provider and model; other tenants keep the agent's", async () => {
    const before = [compat, openai].map((s) => s.requests.length) as [number, number];
    const globex = await run('globex', 'alpha', 'one');
    const acme = await run('acme', 'alpha', 'four');
    expect(asked(openai, before[1])).toEqual([
      { model: 'gpt-tenant', temperature: 0, cap: h.cfg.COMPLETION_TOKEN_CAP },
    ]);
    expect(asked(compat, before[0])).toEqual([{ model: 'llama-alpha', temperature: 0.1, cap: 64 }]);
    expect((await view(globex)).agent).toMatchObject({
      model: 'openai',
      modelId: 'gpt-tenant',
      modelOptions: { temperature: 0 },
    });
    expect((await view(acme)).agent).toMatchObject({ model: 'openai-compatible', modelId: 'llama-alpha' });
  });

  it('a tenant\'s "*" covers every agent, with the provider\'s default model', async () => {
    const before = [anthropic, openai].map((s) => s.requests.length) as [number, number];
    await run('initech', 'beta', 'one');
    expect(asked(openai, before[1]).map((r) => r.model)).toEqual(['gpt-default']);
    expect(anthropic.requests.length).toBe(before[0]);
  });

  it('is binding: a request naming another provider for that tenant is a 400 naming the field, nothing written', async () => {
    const res = await post({ tenant: 'globex', agent: 'alpha', input: { q: 'five' }, model: 'anthropic' });
    expect(res.status).toBe(400);
    // The producer is told where the choice came from.
    expect(res.body.fields![0]!.message).toContain('TENANT_MODELS.globex');
    expect(res.body.fields).toEqual([
      {
        path: 'model',
        message: expect.stringContaining("tenant 'globex' runs agent 'alpha' on provider 'openai'; leave model out"),
      },
    ]);
    const spec = buildSpec(
      { ...fleetContext(fleet), cfg: fleetContext(fleet).cfg },
      { tenant: 'globex', agent: 'alpha', input: { q: 'five' }, model: 'openai' },
      Date.now(),
    );
    expect(await h.ctx.store.exists(spec.runId)).toBe(false);
  });
});

describe('the pin', () => {
  it('is what the worker runs: a run pinned under another configuration keeps its model', async () => {
    // Intake under a configuration this fleet's worker does not have (umbrella -> anthropic, claude-pinned).
    const intakeCfg = loadConfig({
      ...h.env,
      ...modelEnv(),
      TENANT_MODELS: JSON.stringify({ umbrella: { alpha: { provider: 'anthropic', model: 'claude-pinned' } } }),
    });
    const spec = buildSpec(
      { ...fleetContext(fleet), cfg: intakeCfg },
      { tenant: 'umbrella', agent: 'alpha', input: { q: 'one' } },
      Date.now(),
    );
    const before = [compat, anthropic].map((s) => s.requests.length) as [number, number];
    await fleetContext(fleet).store.create(spec, Date.now());
    expect(await h.waitForStatus(spec.runId, ['completed', 'failed'])).toBe('completed');
    expect(asked(anthropic, before[1]).map((r) => r.model)).toEqual(['claude-pinned']);
    expect(compat.requests.length).toBe(before[0]);
  });

  it("a spec pinned before model ids were (provider name only) runs on that provider's default model, as it did", async () => {
    const spec = buildSpec(
      fleetContext(fleet),
      { tenant: 'acme', agent: 'alpha', input: { q: 'legacy' }, model: 'openai' },
      Date.now(),
    );
    const { modelId: _id, modelOptions: _opts, ...legacy } = spec;
    const before = openai.requests.length;
    await fleetContext(fleet).store.create(legacy, Date.now());
    expect(await h.waitForStatus(spec.runId, ['completed', 'failed'])).toBe('completed');
    expect(asked(openai, before).map((r) => r.model)).toEqual(['gpt-default']);
    expect((await view(spec.runId)).agent.modelId).toBeUndefined();
  });

  it('a run naming a provider this worker lacks ends failed with model_unavailable, loudly', async () => {
    const spec = buildSpec(fleetContext(fleet), { tenant: 'acme', agent: 'alpha', input: { q: 'gone' } }, Date.now());
    await fleetContext(fleet).store.create({ ...spec, model: 'mistral', modelId: 'mistral-large' }, Date.now());
    expect(await h.waitForStatus(spec.runId, ['completed', 'failed'])).toBe('failed');
    expect((await h.ctx.store.readState(spec.runId))!.reason).toBe('model_unavailable: mistral');
  });
});

describe('choices the boot refuses, the field named', () => {
  const configError = (fn: () => unknown): ConfigError => {
    try {
      fn();
    } catch (err) {
      if (err instanceof ConfigError) return err;
      throw err;
    }
    throw new Error('no ConfigError');
  };
  const bootError = async (env: Record<string, string>, agents = [alpha, beta]): Promise<ConfigError> => {
    try {
      const ctx = await createContext(loadConfig({ ...h.env, ...env }), 'choice-boot', { agents });
      await ctx.close();
    } catch (err) {
      if (err instanceof ConfigError) return err;
      throw err;
    }
    throw new Error('booted');
  };

  it('TENANT_MODELS that does not parse or validate', () => {
    expect(configError(() => loadConfig({ TENANT_MODELS: '{"acme":' })).fields).toEqual(['TENANT_MODELS']);
    expect(
      configError(() => loadConfig({ TENANT_MODELS: '{"acme":{"alpha":{"provider":"openai","modle":"gpt-4o"}}}' }))
        .fields,
    ).toEqual(['TENANT_MODELS.acme.alpha']);
    const temp = configError(() =>
      loadConfig({ TENANT_MODELS: '{"acme":{"alpha":{"provider":"openai","options":{"temperature":5}}}}' }),
    );
    expect(temp.fields).toEqual(['TENANT_MODELS.acme.alpha.options.temperature']);
    expect(temp.message).toMatch(/^invalid configuration: TENANT_MODELS\.acme\.alpha\.options\.temperature: /);
    expect(
      configError(() => loadConfig({ TENANT_MODELS: '{"acme":{"Alpha!":{"provider":"openai"}}}' })).fields[0],
    ).toMatch(/^TENANT_MODELS\.acme/);
  });

  it('a choice naming a provider this process lacks (no credential, unknown), or an agent it does not run', async () => {
    const noKey = await bootError(
      { ...modelEnv(), ANTHROPIC_API_KEY: '', TENANT_MODELS: '{"acme":{"alpha":{"provider":"anthropic"}}}' },
      [alpha],
    );
    expect(noKey.fields).toEqual(['TENANT_MODELS.acme.alpha.provider']);
    expect(noKey.message).toContain('set ANTHROPIC_API_KEY');
    const agentNoKey = await bootError({ ...modelEnv(), ANTHROPIC_API_KEY: '' });
    expect(agentNoKey.fields).toEqual(["AGENTS_MODULE: agent 'beta' model"]);
    expect(
      (await bootError({ ...modelEnv(), TENANT_MODELS: '{"acme":{"gamma":{"provider":"openai"}}}' })).fields,
    ).toEqual(['TENANT_MODELS.acme.gamma']);
    expect(
      (await bootError({ ...modelEnv(), TENANT_MODELS: '{"acme":{"*":{"provider":"mistral"}}}' })).message,
    ).toContain('no such provider');
  });

  it('real processes: a worker and an API with a bad TENANT_MODELS print one line naming the field and exit 1', async () => {
    const exit = (module: string, env: Record<string, string>) => {
      // Keys the runner's environment may hold are the test's here.
      const child = spawnModule(
        module,
        {
          ...h.env,
          ANTHROPIC_API_KEY: '',
          OPENAI_API_KEY: '',
          LOG_LEVEL: 'info',
          WORKER_METRICS_PORT: '0',
          PORT: '0',
          ...env,
        },
        ['ignore', 'pipe', 'pipe'],
      );
      let stderr = '';
      child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
      return new Promise<{ code: number | null; lines: string[] }>((resolve) =>
        child.once('close', (code) => resolve({ code, lines: stderr.trimEnd().split('\n') })),
      );
    };
    const [worker, api] = await Promise.all([
      exit('src/server/worker', {
        TENANT_MODELS: '{"acme":{"support":{"provider":"anthropic","model":"claude-sonnet-4-5"}}}',
      }),
      exit('src/server/api', { TENANT_MODELS: '{"acme":{"support":{"provider":"openai","options":{"topP":7}}}}' }),
    ]);
    expect(worker.code).toBe(1);
    expect(worker.lines).toEqual([
      expect.stringMatching(
        /^worker: cannot start: invalid configuration: TENANT_MODELS\.acme\.support\.provider: provider 'anthropic' is not enabled on this process: set ANTHROPIC_API_KEY/,
      ),
    ]);
    expect(api.code).toBe(1);
    expect(api.lines).toEqual([
      expect.stringMatching(/^api: cannot start: invalid configuration: TENANT_MODELS\.acme\.support\.options\.topP: /),
    ]);
  }, 60_000);

  it('an agent model choice that does not validate stops at defineAgent, the field named', () => {
    expect(() =>
      defineAgent({
        name: 'bad',
        version: '1',
        input,
        tools: [],
        model: { provider: 'openai', model: 'gpt-4o', options: { temperature: 3 } },
        instructions: () => '',
      }),
    ).toThrow(/agent 'bad': model\.options\.temperature: /);
    expect(() =>
      defineAgent({
        name: 'bad',
        version: '1',
        input,
        tools: [],
        model: { provider: 'openai', model: 'gpt 4o' },
        instructions: () => '',
      }),
    ).toThrow(/agent 'bad': model\.model: a model id/);
    expect(() =>
      defineAgent({
        name: 'bad',
        version: '1',
        input,
        tools: [],
        model: { provider: 'openai', options: { temprature: 1 } } as never,
        instructions: () => '',
      }),
    ).toThrow(/agent 'bad': model\.options: /);
  });

  describe('APP_MODE=production refuses the scripted model', () => {
    const prod = {
      APP_MODE: 'production',
      MODEL_PROVIDER: 'openai',
      OPENAI_API_KEY: 'sk-x',
      PRODUCER_TOKEN: 'producer-token-for-production',
      OPERATOR_TOKEN: 'operator-token-for-production',
      SANDBOX_URL: 'https://support.example.com',
      REDIS_URL: 'redis://127.0.0.1:6379',
      ZENDESK_EMAIL: 'agent@example.com',
      ZENDESK_TOKEN: 'z',
      RESEND_API_KEY: 're_x',
      RESEND_FROM: 'Support <support@example.com>',
      STRIPE_API_KEY: 'sk_test_x',
    };

    it('in TENANT_MODELS', () => {
      const e = configError(() => loadConfig({ ...prod, TENANT_MODELS: '{"acme":{"*":{"provider":"scripted"}}}' }));
      expect(e.fields).toEqual(['TENANT_MODELS.acme.*.provider']);
    });

    it("as an agent's choice: the boot stops before any run is accepted", async () => {
      const scripted = defineAgent({
        name: 'canned',
        version: '1',
        input,
        tools: [],
        model: 'scripted',
        instructions: () => '',
      });
      const cfg = loadConfig(prod);
      await expect(createContext(cfg, 'choice-prod', { agents: [scripted] })).rejects.toThrow(
        /agent 'canned' model: provider 'scripted' is not enabled on this process: the scripted model runs in APP_MODE=development only/,
      );
    });
  });
});
