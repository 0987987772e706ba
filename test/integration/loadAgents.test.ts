/**
 * Loading a deployment's agents (AGENTS_MODULE, src/server/loadAgents.ts): the module's settings
 * are parsed before its agents are built, and a setting it lacks stops the boot naming the field.
 * Here, not in the unit tier: each case imports a whole agents module (the lead-qualifier through
 * the package's entry), seconds of imports for two assertions.
 */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { ConfigError } from '../../src/core/errors.js';
import { loadAgents } from '../../src/server/loadAgents.js';
import { productionEngine, supportVendors } from '../fixtures/productionEnv.js';

const engine = productionEngine;
const vendors = supportVendors;

describe("loading a deployment's agents", () => {
  it('the built-in module in production without Stripe keys stops the boot naming STRIPE_API_KEY', async () => {
    const cfg = loadConfig({ ...engine, ...vendors, STRIPE_API_KEY: undefined });
    await expect(loadAgents(cfg)).rejects.toThrow(/^invalid configuration: STRIPE_API_KEY: required in production/);
    expect((await loadAgents(loadConfig({ ...engine, ...vendors }))).names).toEqual(['support']);
  });

  it('the lead-qualifier runs in production with its CRM and no vendor of the support agent', async () => {
    const lead = { ...engine, AGENTS_MODULE: 'examples/lead-qualifier/index.ts' };
    expect((await loadAgents(loadConfig({ ...lead, CRM_URL: 'https://crm.example.com' }))).names).toEqual([
      'lead-qualifier',
    ]);
    const e = await loadAgents(loadConfig(lead)).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as ConfigError).fields).toEqual(['CRM_URL']);
  });
});
