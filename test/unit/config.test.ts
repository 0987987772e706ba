/** Configuration parsing and the test hooks, without Redis. */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { ConfigError } from '../../src/core/errors.js';
import { CrashPoints, scriptedModelAllowed, testHooksFrom } from '../../src/config/testHooks.js';

const prod = {
  APP_MODE: 'production',
  MODEL_PROVIDER: 'openai',
  OPENAI_API_KEY: 'sk-x',
  PRODUCER_TOKEN: 'p',
  OPERATOR_TOKEN: 'o',
  REDIS_URL: 'redis://redis:6379',
  SANDBOX_URL: 'http://support:4010',
  ZENDESK_EMAIL: 'agent@acme.com',
  ZENDESK_TOKEN: 'zd-token',
  RESEND_API_KEY: 're_live',
  RESEND_FROM: 'Acme <support@acme.com>',
  STRIPE_API_KEY: 'sk_live_x',
};

function refusal(env: Record<string, string | undefined>): ConfigError {
  try {
    loadConfig(env);
  } catch (e) {
    if (e instanceof ConfigError) return e;
    throw e;
  }
  throw new Error(`accepted: ${JSON.stringify(env)}`);
}

describe('loadConfig', () => {
  it('defaults, coerced and frozen; empty strings are unset', () => {
    const cfg = loadConfig({ WORKER_CONCURRENCY: '7', KEY_PREFIX: '' });
    expect(cfg.WORKER_CONCURRENCY).toBe(7);
    expect(cfg.KEY_PREFIX).toBe('agent');
    expect(cfg.APP_MODE).toBe('development');
    expect(Object.isFrozen(cfg)).toBe(true);
  });

  it('names every bad field', () => {
    const err = refusal({ WORKER_CONCURRENCY: 'many', KEY_PREFIX: 'a:b' });
    expect(err.fields.sort()).toEqual(['KEY_PREFIX', 'WORKER_CONCURRENCY']);
    expect(err.code).toBe('config_invalid');
  });

  it('a default budget above its limit is refused', () => {
    expect(refusal({ DEFAULT_MAX_STEPS: '50', LIMIT_MAX_STEPS: '10' }).fields).toEqual(['DEFAULT_MAX_STEPS']);
  });

  it('an operator reserve of every event stream is refused: tenants would get none', () => {
    expect(refusal({ SSE_MAX_VIEWERS: '100' }).fields).toEqual(['SSE_OPERATOR_RESERVE']);
    expect(refusal({ SSE_MAX_VIEWERS: '50', SSE_OPERATOR_RESERVE: '50' }).fields).toEqual(['SSE_OPERATOR_RESERVE']);
    expect(loadConfig({ SSE_MAX_VIEWERS: '50', SSE_OPERATOR_RESERVE: '49' }).SSE_OPERATOR_RESERVE).toBe(49);
  });

  it('a tenant weight too small for exact turns is refused (flow control)', () => {
    for (const w of ['1e-300', '5e-324', '0.0001'])
      expect(refusal({ FLOW_TENANT_WEIGHTS: `{"acme":${w}}` }).fields).toEqual(['FLOW_TENANT_WEIGHTS.acme']);
    expect(loadConfig({ FLOW_TENANT_WEIGHTS: '{"acme":0.001,"big":1000}' }).FLOW_TENANT_WEIGHTS).toEqual({
      acme: 0.001,
      big: 1000,
    });
  });

  it('production boots without test switches, and refuses each of them', () => {
    expect(loadConfig(prod).APP_MODE).toBe('production');
    expect(refusal({ ...prod, UNSAFE_DISABLE_IDEMPOTENCY: 'true' }).fields).toEqual(['UNSAFE_DISABLE_IDEMPOTENCY']);
    expect(refusal({ ...prod, CRASH_POINTS: 'after_decision' }).fields).toEqual(['CRASH_POINTS']);
    expect(refusal({ ...prod, PAUSE_POINTS: 'after_dispatched@2=2500' }).fields).toEqual(['PAUSE_POINTS']);
    expect(refusal({ ...prod, SCRIPTED_MODEL_ENABLED: 'true' }).fields).toEqual(['SCRIPTED_MODEL_ENABLED']);
  });
});

describe('test hooks', () => {
  it('are decided once from the configuration', () => {
    const hooks = testHooksFrom(loadConfig({ UNSAFE_DISABLE_IDEMPOTENCY: 'true' }));
    expect(hooks.unsafeDisableIdempotency).toBe(true);
    expect(hooks.scriptedModelAllowed).toBe(true);
    expect(testHooksFrom(loadConfig({})).unsafeDisableIdempotency).toBe(false);
  });

  it('the scripted model: development only, unless switched off', () => {
    expect(scriptedModelAllowed(loadConfig({}))).toBe(true);
    expect(scriptedModelAllowed(loadConfig({ SCRIPTED_MODEL_ENABLED: 'false' }))).toBe(false);
    expect(scriptedModelAllowed(loadConfig(prod))).toBe(false);
  });

  it('crash points kill at the armed point and step only; pause points pause once', () => {
    let kills = 0;
    const cfg = loadConfig({ CRASH_POINTS: 'after_decision@2' });
    const crash = new CrashPoints(cfg.CRASH_POINTS, () => kills++);
    crash.hit('after_decision', 1);
    crash.hit('after_commit', 2);
    expect(kills).toBe(0);
    crash.hit('after_decision', 2);
    expect(kills).toBe(1);
  });
});
