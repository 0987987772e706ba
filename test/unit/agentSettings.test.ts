/**
 * An agents module's settings are its own: the engine's configuration names no vendor, a module
 * declares a schema over the environment, sees only the names it declares, and a value that does
 * not parse stops the boot naming the field. The support agent's vendors are shown here; loading
 * whole modules (the support agent's, the lead-qualifier's with its CRM) is
 * test/integration/loadAgents.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { supportSettings } from '../../src/agents/support/settings.js';
import { supportServices } from '../../src/agents/support/vendors/index.js';
import { defineAgentsModule, parseAgentSettings } from '../../src/config/agentsModule.js';
import { environmentOf, loadConfig } from '../../src/config/config.js';
import { ConfigError } from '../../src/core/errors.js';
import { productionEngine, supportVendors } from '../fixtures/productionEnv.js';

const engine = productionEngine;
const vendors = supportVendors;

function refusal(run: () => unknown): ConfigError {
  try {
    run();
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return e as ConfigError;
  }
  throw new Error('accepted');
}

describe('the engine configuration', () => {
  it('boots production with no vendor setting at all', () => {
    const cfg = loadConfig(engine);
    expect(cfg.APP_MODE).toBe('production');
    expect(Object.keys(cfg).filter((k) => /^(ZENDESK|RESEND|STRIPE|SANDBOX)_/.test(k))).toEqual([]);
  });

  it('keeps the environment it was read from for the agents module', () => {
    const cfg = loadConfig({ ...engine, CRM_URL: 'http://crm:4020', EMPTY: '' });
    expect(environmentOf(cfg)).toMatchObject({ CRM_URL: 'http://crm:4020' });
    expect(environmentOf(cfg)).not.toHaveProperty('EMPTY');
    expect(Object.isFrozen(environmentOf(cfg))).toBe(true);
  });
});

describe("a module's settings", () => {
  const cfg = loadConfig(engine);

  it("hands the schema only the names it declares (an agent never sees the engine's secrets)", () => {
    const loose = z.looseObject({ CRM_URL: z.url() });
    const settings = parseAgentSettings(loose, cfg, {
      CRM_URL: 'http://crm:4020',
      OPERATOR_TOKEN: 'o',
      OPENAI_API_KEY: 'sk-x',
    });
    expect(settings).toEqual({ CRM_URL: 'http://crm:4020' });
  });

  it('names each field that does not parse', () => {
    const schema = z.object({ CRM_URL: z.url(), CRM_TIMEOUT_MS: z.coerce.number().int().positive() });
    const e = refusal(() => parseAgentSettings(schema, cfg, { CRM_URL: 'not a url', CRM_TIMEOUT_MS: 'soon' }));
    expect(e.fields.sort()).toEqual(['CRM_TIMEOUT_MS', 'CRM_URL']);
    expect(e.message).toMatch(/^invalid configuration: CRM_URL: .*CRM_TIMEOUT_MS: /);
  });
});

describe("the support agent's settings", () => {
  const prod = loadConfig(engine);
  const dev = loadConfig({});
  const parse = (cfg: typeof prod, env: Record<string, string | undefined>) =>
    parseAgentSettings(supportSettings, cfg, env);

  it('production refuses each vendor setting it lacks, naming it', () => {
    expect(parse(prod, vendors).STRIPE_API_KEY).toBe('sk_live_x');
    expect(refusal(() => parse(prod, { ...vendors, SANDBOX_URL: undefined })).fields).toEqual(['SANDBOX_URL']);
    expect(refusal(() => parse(prod, { ...vendors, ZENDESK_TOKEN: undefined })).fields).toEqual(['ZENDESK_TOKEN']);
    expect(refusal(() => parse(prod, { ...vendors, ZENDESK_EMAIL: undefined })).fields).toEqual(['ZENDESK_TOKEN']);
    expect(
      parse(prod, { ...vendors, ZENDESK_EMAIL: undefined, ZENDESK_TOKEN: undefined, ZENDESK_OAUTH_TOKEN: 'oauth' })
        .ZENDESK_OAUTH_TOKEN,
    ).toBe('oauth');
    expect(refusal(() => parse(prod, { ...vendors, RESEND_API_KEY: undefined })).fields).toEqual(['RESEND_API_KEY']);
    expect(refusal(() => parse(prod, { ...vendors, RESEND_FROM: undefined })).fields).toEqual(['RESEND_FROM']);
    const stripe = refusal(() => parse(prod, { ...vendors, STRIPE_API_KEY: '' }));
    expect(stripe.fields).toEqual(['STRIPE_API_KEY']);
    expect(stripe.message).toMatch(
      /^invalid configuration: STRIPE_API_KEY: required in production \(the payments service/,
    );
  });

  it('development takes the sandbox for every unset vendor', () => {
    const services = supportServices(parse(dev, {}));
    expect(services.reads.baseUrl).toBe('http://127.0.0.1:4010');
    expect(services.stripe).toMatchObject({ baseUrl: 'http://127.0.0.1:4010', apiKey: 'sk_test_sandbox' });
  });

  it('points each vendor at its own URL and credentials; an unset URL is SANDBOX_URL', () => {
    const real = supportServices(
      parse(prod, {
        ...vendors,
        ZENDESK_URL: 'https://acme.zendesk.com/',
        RESEND_URL: 'https://api.resend.com',
        STRIPE_URL: 'https://api.stripe.com',
        STRIPE_TIMEOUT_MS: '8000',
      }),
    );
    expect(real.zendesk).toEqual({
      baseUrl: 'https://acme.zendesk.com',
      auth: { kind: 'api_token', email: 'agent@acme.com', token: 'zd-token' },
      timeoutMs: 5000,
    });
    expect(real.resend).toEqual({
      baseUrl: 'https://api.resend.com',
      apiKey: 're_live',
      from: 'Acme <support@acme.com>',
      timeoutMs: 5000,
    });
    expect(real.stripe).toEqual({ baseUrl: 'https://api.stripe.com', apiKey: 'sk_live_x', timeoutMs: 8000 });
    expect(real.reads.baseUrl).toBe('http://support:4010');
    const oauth = supportServices(parse(prod, { ...vendors, ZENDESK_OAUTH_TOKEN: 'oauth' }));
    expect(oauth.zendesk).toMatchObject({
      baseUrl: 'http://support:4010',
      auth: { kind: 'oauth', accessToken: 'oauth' },
    });
  });
});

describe('defineAgentsModule', () => {
  it('returns the module, frozen', () => {
    const module = defineAgentsModule({ settings: z.object({ N: z.coerce.number() }), agents: () => [] });
    expect(typeof module.agents).toBe('function');
    expect(Object.isFrozen(module)).toBe(true);
  });
});
