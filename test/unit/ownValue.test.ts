/**
 * Settings keyed by a name someone chose (a tenant's, an agent's) read their own entries only: a tenant or an agent
 * named `constructor`, `toString` or `name` is a valid name, and must not find Object.prototype's (or a function's)
 * property where the setting has no entry.
 */
import { describe, expect, it } from 'vitest';
import { ownValue } from '../../src/core/ownValue.js';
import { StepPriorities } from '../../src/flow/stepPriority.js';
import { tenantOverride } from '../../src/producer/modelChoice.js';

describe('settings by name', () => {
  it('reads own entries only', () => {
    const limits: Record<string, number> = { acme: 5 };
    expect(ownValue(limits, 'acme')).toBe(5);
    expect(ownValue(limits, 'constructor')).toBeUndefined();
    expect(ownValue(limits, 'toString')).toBeUndefined();
  });

  it('gives a tenant named constructor the default weight, as any tenant without one of its own', () => {
    // A default weight of 4: three runs at work are under its load of 2, the lowest priority level (0).
    const steps = new StepPriorities({ acme: 2 }, 4);
    steps.update({ counts: { 't:constructor': '3', 't:other': '3' }, settings: {} });
    expect([steps.of('constructor'), steps.of('other')]).toEqual([0, 0]);
  });

  it('finds no model override for a tenant or an agent without one, whatever its name', () => {
    const cfg = {
      MODEL_PROVIDER: 'scripted',
      TENANT_MODELS: { acme: { support: { provider: 'openai', model: 'gpt-4o-mini' } } },
    } as never;
    expect(tenantOverride(cfg, 'constructor', 'support')).toBeUndefined();
    // A function's own `name`: what indexing Object.prototype's constructor by an agent named so would find.
    expect(tenantOverride(cfg, 'constructor', 'name')).toBeUndefined();
    expect(tenantOverride(cfg, 'acme', 'name')).toBeUndefined();
    expect(tenantOverride(cfg, 'acme', 'support')).toMatchObject({ model: 'gpt-4o-mini' });
  });
});
