/** An agent's search fields (Agent.search): bounded and validated at intake, a value out of bounds named. */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent, SearchFieldError, searchFieldsOf } from '../../src/core/agent.js';

const fieldOf = (f: () => unknown) => {
  try {
    f();
  } catch (err) {
    if (err instanceof SearchFieldError) return err.field;
    throw err;
  }
  return undefined;
};

describe('search fields', () => {
  it('keeps 1..200-character strings under valid names and leaves out absent or empty values', () => {
    expect(searchFieldsOf('a', { customer: 'ada@example.com', orderId: undefined, note: '' })).toEqual({
      customer: 'ada@example.com',
    });
    expect(searchFieldsOf('a', undefined)).toEqual({});
  });

  it('names the field at fault: a bad name, a long or non-string value, too many fields', () => {
    expect(fieldOf(() => searchFieldsOf('a', { 'Bad-Name': 'x' }))).toBe('search.Bad-Name');
    expect(fieldOf(() => searchFieldsOf('a', { customer: 'x'.repeat(201) }))).toBe('search.customer');
    expect(fieldOf(() => searchFieldsOf('a', { n: 5 }))).toBe('search.n');
    const nine = Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`f${i}`, 'v']));
    expect(fieldOf(() => searchFieldsOf('a', nine))).toBe('search');
    expect(fieldOf(() => searchFieldsOf('a', ['x']))).toBe('search');
  });

  it("an agent's search is checked on every call; one without declares none", () => {
    const base = { name: 'a', version: '1', input: z.object({ e: z.string() }), tools: [], instructions: () => '' };
    const agent = defineAgent({ ...base, search: (i) => ({ customer: i.e }) });
    expect(agent.search({ e: 'x' })).toEqual({ customer: 'x' });
    expect(fieldOf(() => agent.search({ e: 'x'.repeat(300) }))).toBe('search.customer');
    expect(defineAgent(base).search({ e: 'x' })).toEqual({});
  });
});
