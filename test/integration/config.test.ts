/**
 * Configuration fails at boot with the field named; the test hooks are decided once from it and
 * refused in production; Redis must be noeviction.
 */
import { describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { loadConfig } from '../../src/config/config.js';
import { ConfigError } from '../../src/core/errors.js';
import { CrashPoints, scriptedModelAllowed, testHooksFrom } from '../../src/config/testHooks.js';
import { buildProviders } from '../../src/server/buildContext.js';
import type { EngineContext } from '../../src/runs/engineContext.js';
import { AgentCatalog } from '../../src/core/agent.js';
import { supportAgent } from '../../src/agents/support/index.js';
import { buildSpec, type InvalidRunRequest } from '../../src/producer/intake.js';
import type { ShorthandRunRequest } from '../../src/producer/schemas.js';
import { assertRedisSafe, RedisMisconfigured } from '../../src/store/connect.js';
import { startEmbeddedRedis } from '../../testkit/embeddedRedis.js';
import { productionEngine } from '../fixtures/productionEnv.js';

function refusal(env: Record<string, string | undefined>): ConfigError {
  try {
    loadConfig(env);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return e as ConfigError;
  }
  throw new Error(`accepted: ${JSON.stringify(env)}`);
}

describe('config', () => {
  it('has documented defaults, coerced and frozen; empty strings are unset', () => {
    const cfg = loadConfig({});
    expect(cfg.LOCK_DURATION_MS).toBe(20000);
    expect(cfg.STALLED_INTERVAL_MS).toBe(5000);
    expect(cfg.OWNER_WATCH_MS).toBe(100);
    expect(cfg.SHARDS).toBe(1);
    expect(cfg.APP_MODE).toBe('development');
    expect(Object.isFrozen(cfg)).toBe(true);
    const set = loadConfig({ WORKER_CONCURRENCY: '7', KEY_PREFIX: '' });
    expect(set.WORKER_CONCURRENCY).toBe(7);
    expect(set.KEY_PREFIX).toBe('agent');
  });

  it('names every bad field', () => {
    expect(() => loadConfig({ LOCK_DURATION_MS: 'soon' })).toThrow(/LOCK_DURATION_MS/);
    expect(refusal({ WORKER_CONCURRENCY: '0', REDIS_URL: 'not a url' }).fields.sort()).toEqual([
      'REDIS_URL',
      'WORKER_CONCURRENCY',
    ]);
    const err = refusal({ WORKER_CONCURRENCY: 'many', KEY_PREFIX: 'a:b' });
    expect(err.fields.sort()).toEqual(['KEY_PREFIX', 'WORKER_CONCURRENCY']);
    expect(err.code).toBe('config_invalid');
  });

  it('refuses a default budget above the largest a request may ask (every request without a budget would be a 400)', () => {
    expect(() => loadConfig({ DEFAULT_MAX_STEPS: '300' })).toThrow(
      /DEFAULT_MAX_STEPS: 300 is above LIMIT_MAX_STEPS \(200\)/,
    );
    expect(refusal({ DEFAULT_MAX_STEPS: '50', LIMIT_MAX_STEPS: '10' }).fields).toEqual(['DEFAULT_MAX_STEPS']);
    expect(() => loadConfig({ DEFAULT_MAX_WALL_MS: String(2 * 24 * 3600_000) })).toThrow(/DEFAULT_MAX_WALL_MS/);
    expect(loadConfig({ DEFAULT_MAX_STEPS: '300', LIMIT_MAX_STEPS: '300' }).DEFAULT_MAX_STEPS).toBe(300);
  });

  it('a tenant weight too small for exact turns is refused (flow control)', () => {
    for (const w of ['1e-300', '5e-324', '0.0001'])
      expect(refusal({ FLOW_TENANT_WEIGHTS: `{"acme":${w}}` }).fields).toEqual(['FLOW_TENANT_WEIGHTS.acme']);
    expect(loadConfig({ FLOW_TENANT_WEIGHTS: '{"acme":0.001,"big":1000}' }).FLOW_TENANT_WEIGHTS).toEqual({
      acme: 0.001,
      big: 1000,
    });
  });

  it('a tenant weight or limit is keyed by a tenant name: "*" (every tenant) and a bad name are refused, named', () => {
    for (const field of ['FLOW_TENANT_WEIGHTS', 'FLOW_TENANT_LIMITS'])
      for (const name of ['*', 'acme corp', '-acme', 'x'.repeat(64)]) {
        const e = refusal({ [field]: JSON.stringify({ acme: 2, [name]: 2 }) });
        expect(e.fields, `${field} ${name}`).toEqual([`${field}.${name}`]);
        expect(e.message).toContain('"*" is every tenant');
      }
    const cfg = loadConfig({ FLOW_TENANT_WEIGHTS: '{"acme":2,"Globex_2":3}', FLOW_TENANT_LIMITS: '{"tenant-a":4}' });
    expect(cfg.FLOW_TENANT_WEIGHTS).toEqual({ acme: 2, Globex_2: 3 });
    expect(cfg.FLOW_TENANT_LIMITS).toEqual({ 'tenant-a': 4 });
  });

  it('an operator reserve of every event stream is refused: tenants would get none', () => {
    expect(refusal({ SSE_MAX_VIEWERS: '100' }).fields).toEqual(['SSE_OPERATOR_RESERVE']);
    expect(refusal({ SSE_MAX_VIEWERS: '50', SSE_OPERATOR_RESERVE: '50' }).fields).toEqual(['SSE_OPERATOR_RESERVE']);
    expect(loadConfig({ SSE_MAX_VIEWERS: '50', SSE_OPERATOR_RESERVE: '49' }).SSE_OPERATOR_RESERVE).toBe(49);
  });

  describe('APP_MODE=production', () => {
    const prod = productionEngine;
    it("boots with a real model, its key, tokens and Redis: no vendor is the engine's to name", () => {
      expect(loadConfig(prod).APP_MODE).toBe('production');
      // A vendor's provider exists only with its credential: a choice naming anthropic here stops the boot.
      expect([...buildProviders(loadConfig(prod)).keys()]).toEqual(['openai']);
    });

    it('refuses every credential shorter than 16 characters, naming its setting and never its value', () => {
      const short = 'short-secret-15';
      for (const [field, env] of [
        ['PRODUCER_TOKEN', { PRODUCER_TOKEN: short }],
        ['OPERATOR_TOKEN', { OPERATOR_TOKEN: short }],
        ['BULL_BOARD_PASSWORD', { BULL_BOARD_USER: 'admin', BULL_BOARD_PASSWORD: short }],
        ['METRICS_TOKEN', { METRICS_TOKEN: short }],
        ['TENANT_TOKENS.acme', { TENANT_TOKENS: JSON.stringify({ acme: short }) }],
        ['WEBHOOK_SECRETS.acme', { WEBHOOK_SECRETS: JSON.stringify({ acme: short }) }],
      ] as const) {
        const e = refusal({ ...prod, ...env });
        expect(e.fields, field).toEqual([field]);
        expect(e.message, field).toBe(
          `invalid configuration: ${field}: must be at least 16 characters (APP_MODE=production)`,
        );
        expect(e.message).not.toContain(short);
        // One character more is enough, and development keeps its own (shorter) floor.
        const long = JSON.parse(JSON.stringify(env).replaceAll(short, `${short}x`)) as Record<string, string>;
        expect(loadConfig({ ...prod, ...long }).APP_MODE, field).toBe('production');
        expect(loadConfig({ ...prod, ...env, APP_MODE: 'development' }).APP_MODE, field).toBe('development');
      }
    });

    it('names the key or server each real provider needs; an OpenAI-compatible server comes with its model', () => {
      expect(refusal({ ...prod, MODEL_PROVIDER: 'anthropic' }).fields).toEqual(['ANTHROPIC_API_KEY']);
      expect(loadConfig({ ...prod, MODEL_PROVIDER: 'anthropic', ANTHROPIC_API_KEY: 'ak-x' }).MODEL_PROVIDER).toBe(
        'anthropic',
      );
      expect(refusal({ ...prod, MODEL_PROVIDER: 'openai-compatible' }).fields).toEqual(['OPENAI_COMPATIBLE_BASE_URL']);
      expect(refusal({ ...prod, OPENAI_COMPATIBLE_BASE_URL: 'http://vllm:8000/v1' }).fields).toEqual([
        'OPENAI_COMPATIBLE_MODEL',
      ]);
      const compat = loadConfig({
        ...prod,
        MODEL_PROVIDER: 'openai-compatible',
        OPENAI_COMPATIBLE_BASE_URL: 'http://vllm:8000/v1',
        OPENAI_COMPATIBLE_MODEL: 'qwen',
      });
      expect([...buildProviders(compat).keys()]).toEqual(['openai', 'openai-compatible']);
    });

    it('refuses the scripted model, even when SCRIPTED_MODEL_ENABLED=true asks for it', () => {
      expect(refusal({ ...prod, MODEL_PROVIDER: 'scripted' }).fields).toEqual(['MODEL_PROVIDER']);
      expect(refusal({ ...prod, MODEL_PROVIDER: undefined }).fields).toEqual(['MODEL_PROVIDER']);
      expect(refusal({ ...prod, MODEL_PROVIDER: 'scripted', SCRIPTED_MODEL_ENABLED: 'true' }).fields).toEqual([
        'MODEL_PROVIDER',
      ]);
      // the opt-in made the scripted provider (and so run-supplied scripts) available beside openai
      const optIn = refusal({ ...prod, SCRIPTED_MODEL_ENABLED: 'true' });
      expect(optIn.fields).toEqual(['SCRIPTED_MODEL_ENABLED']);
      expect(optIn.message).toMatch(/run-supplied scripts/);
    });

    it('boots without test switches, and refuses each of them', () => {
      expect(refusal({ ...prod, UNSAFE_DISABLE_IDEMPOTENCY: 'true' }).fields).toEqual(['UNSAFE_DISABLE_IDEMPOTENCY']);
      expect(refusal({ ...prod, CRASH_POINTS: 'after_decision' }).fields).toEqual(['CRASH_POINTS']);
      expect(refusal({ ...prod, PAUSE_POINTS: 'after_dispatched@2=2500' }).fields).toEqual(['PAUSE_POINTS']);
    });

    it('refuses openai without OPENAI_API_KEY, and a process without Redis, naming the field', () => {
      expect(refusal({ ...prod, OPENAI_API_KEY: undefined }).fields).toEqual(['OPENAI_API_KEY']);
      expect(refusal({ ...prod, OPENAI_API_KEY: '' }).message).toMatch(/^invalid configuration: OPENAI_API_KEY: /);
      expect(refusal({ ...prod, REDIS_URL: undefined }).fields).toEqual(['REDIS_URL']);
      expect(
        loadConfig({ ...prod, REDIS_URL: undefined, REDIS_CLUSTER_NODES: 'r1:6379,r2:6379' }).REDIS_CLUSTER_NODES,
      ).toHaveLength(2);
      expect(refusal({ ...prod, PRODUCER_TOKEN: undefined }).fields).toContain('PRODUCER_TOKEN');
    });

    it('refuses a run-supplied script at the API edge, naming agent.script', () => {
      const cfg = loadConfig(prod);
      const ctx = {
        cfg,
        providers: buildProviders(cfg),
        agents: new AgentCatalog([supportAgent({ baseUrl: 'http://support:4010' })]),
      } as unknown as EngineContext;
      const req = {
        tenant: 'acme',
        ticket: { id: 'T-1', subject: 's', body: 'b', customer: { email: 'a@example.com', name: 'A' } },
      };
      expect(buildSpec(ctx, req, 0).model).toBe('openai');
      const refused = (agent: ShorthandRunRequest['agent'], seesDeployment = false) => {
        try {
          buildSpec(ctx, { ...req, agent }, 0);
        } catch (e) {
          return (e as InvalidRunRequest).fieldsFor(seesDeployment);
        }
        throw new Error('accepted');
      };
      const script = [
        { toolCalls: [], transientFailures: 0, final: 'done', usage: { promptTokens: 1, completionTokens: 1 } },
      ];
      expect(refused({ script })).toEqual([{ path: 'agent.script', message: 'run-supplied scripts are refused' }]);
      // Which settings refuse them is the producer's to see.
      expect(refused({ script }, true)[0]!.message).toMatch(/APP_MODE=production/);
      expect(refused({ model: 'scripted', script }).map((f) => f.path)).toEqual(['agent.model', 'agent.script']);
    });

    it('development keeps the scripted model unless SCRIPTED_MODEL_ENABLED=false', () => {
      expect(scriptedModelAllowed(loadConfig({}))).toBe(true);
      expect(scriptedModelAllowed(loadConfig({ SCRIPTED_MODEL_ENABLED: 'false' }))).toBe(false);
      expect(scriptedModelAllowed(loadConfig(prod))).toBe(false);
    });
  });

  describe('test hooks', () => {
    it('are decided once from the configuration', () => {
      const hooks = testHooksFrom(loadConfig({ UNSAFE_DISABLE_IDEMPOTENCY: 'true' }));
      expect(hooks.unsafeDisableIdempotency).toBe(true);
      expect(hooks.scriptedModelAllowed).toBe(true);
      expect(testHooksFrom(loadConfig({})).unsafeDisableIdempotency).toBe(false);
    });

    it('crash points kill at the armed point and step only', () => {
      let kills = 0;
      const cfg = loadConfig({ CRASH_POINTS: 'after_decision@2' });
      const crash = new CrashPoints(cfg.CRASH_POINTS, () => kills++);
      crash.hit('after_decision', 1);
      crash.hit('after_commit', 2);
      expect(kills).toBe(0);
      crash.hit('after_decision', 2);
      expect(kills).toBe(1);
    });

    it('a pause point armed with `stop` stops the process at its point and step, once, and kills nothing', () => {
      let kills = 0;
      let stops = 0;
      const cfg = loadConfig({ PAUSE_POINTS: 'after_decision@2=stop' });
      const crash = new CrashPoints(
        cfg.CRASH_POINTS,
        () => kills++,
        cfg.PAUSE_POINTS,
        () => stops++,
      );
      crash.hit('after_decision', 1);
      crash.hit('after_commit', 2);
      expect(stops).toBe(0);
      crash.hit('after_decision', 2);
      expect(stops).toBe(1);
      // Once: the step's redelivery to this process runs on.
      crash.hit('after_decision', 2);
      expect(stops).toBe(1);
      expect(kills).toBe(0);
    });
  });

  it('refuses an evicting Redis with a message saying how to fix it, warns when AOF is off', async () => {
    const evicting = await startEmbeddedRedis({
      extraArgs: ['--maxmemory-policy', 'allkeys-lru', '--appendonly', 'no'],
    });
    const client = new Redis(evicting.url);
    try {
      await expect(assertRedisSafe(client, () => {})).rejects.toThrow(RedisMisconfigured);
      await expect(assertRedisSafe(client, () => {})).rejects.toThrow(/CONFIG SET maxmemory-policy noeviction/);
      await client.config('SET', 'maxmemory-policy', 'noeviction');
      const warnings: string[] = [];
      const report = await assertRedisSafe(client, (m) => warnings.push(m));
      expect(report.aof).toBe(false);
      expect(warnings[0]).toMatch(/AOF is off/);
    } finally {
      client.disconnect();
      await evicting.stop();
    }
  });
});
