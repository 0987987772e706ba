/** An agent's own ways in (`intake`): checked at definition, one owner per shorthand field and webhook name. */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { AgentCatalog, defineAgent, type AgentDefinition } from '../../src/core/agent.js';
import { createRunSchemaFor, normalizeRunRequest } from '../../src/producer/schemas.js';

const base: AgentDefinition<{ order: string }> = {
  name: 'orders',
  version: 'orders@1',
  input: z.object({ order: z.string() }).strict(),
  tools: [],
  instructions: () => 'help',
};
const hook = {
  summary: 'An order event.',
  body: z.object({ id: z.string() }),
  event: (b: { id: string }) => ({
    id: b.id,
    input: { order: b.id },
  }),
};

describe('agent intake', () => {
  it('refuses a shorthand that is a run field or malformed, and a malformed webhook name', () => {
    expect(() => defineAgent({ ...base, intake: { shorthand: 'input' } })).toThrow(/intake.shorthand 'input'/);
    expect(() => defineAgent({ ...base, intake: { shorthand: 'Order!' } })).toThrow(/intake.shorthand/);
    expect(() => defineAgent({ ...base, intake: { webhooks: { 'a/b': hook } } })).toThrow(/webhook name 'a\/b'/);
  });

  it('two agents may not claim one shorthand field or one webhook name', () => {
    const a = defineAgent({ ...base, intake: { shorthand: 'order', webhooks: { orders: hook } } });
    const sameField = defineAgent({ ...base, name: 'other', intake: { shorthand: 'order' } });
    const sameHook = defineAgent({ ...base, name: 'third', intake: { webhooks: { orders: hook } } });
    expect(() => new AgentCatalog([a, sameField])).toThrow(/'orders' and 'other' both take the shorthand 'order'/);
    expect(() => new AgentCatalog([a, sameHook])).toThrow(/'orders' and 'third' both take the webhook 'orders'/);
  });

  it('a shorthand body is the named-agent request of the agent that claims its field', () => {
    const agents = new AgentCatalog([defineAgent({ ...base, intake: { shorthand: 'order' } })]);
    const body = { tenant: 'acme', order: { order: 'O-1' }, agent: { model: 'scripted' } };
    const parsed = createRunSchemaFor(agents, body).parse(body);
    expect(normalizeRunRequest(agents, parsed)).toMatchObject({
      tenant: 'acme',
      agent: 'orders',
      input: { order: 'O-1' },
      model: 'scripted',
      fields: { input: 'order', model: 'agent.model' },
    });
    // No agent claims `ticket` here: the body is read as the named-agent form, whose errors say what it needs.
    const unclaimed = createRunSchemaFor(agents, { tenant: 'acme', ticket: {} }).safeParse({
      tenant: 'acme',
      ticket: {},
    });
    expect(unclaimed.success).toBe(false);
    expect(unclaimed.error!.issues.map((i) => i.path.join('.'))).toEqual(expect.arrayContaining(['agent']));
  });

  it("a shorthand field's schema is built once, not per request (zod compiles a schema on its first parses)", () => {
    const agents = new AgentCatalog([defineAgent({ ...base, intake: { shorthand: 'order' } })]);
    const body = { tenant: 'acme', order: { order: 'O-1' } };
    const first = createRunSchemaFor(agents, body);
    expect(createRunSchemaFor(agents, { ...body, order: { order: 'O-2' } })).toBe(first);
    // Still strict, and still naming the field when it is missing.
    expect(first.safeParse({ ...body, extra: 1 }).success).toBe(false);
    expect(first.safeParse({ tenant: 'acme' }).error!.issues.map((i) => i.path.join('.'))).toEqual(['order']);
  });
});
