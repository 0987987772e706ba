/** The limits every request body is held to before any schema reads it (src/producer/bodyLimits.ts). */
import { describe, expect, it } from 'vitest';
import { illFormedStringPath, MAX_BODY_DEPTH, nestedDeeperThan } from '../../src/producer/bodyLimits.js';

const nested = (levels: number, leaf: unknown = 1): unknown => {
  let v = leaf;
  for (let i = 1; i < levels; i++) v = i % 2 === 0 ? [v] : { a: v };
  return v;
};

describe('nestedDeeperThan', () => {
  it('counts objects and arrays alike, up to the limit and one past it', () => {
    expect(nestedDeeperThan(nested(MAX_BODY_DEPTH, {}))).toBe(false);
    expect(nestedDeeperThan(nested(MAX_BODY_DEPTH + 1, {}))).toBe(true);
    expect(nestedDeeperThan({ a: [1, 'x', null], b: { c: [] } }, 3)).toBe(false);
    expect(nestedDeeperThan({ a: [1, 'x', null], b: { c: [{}] } }, 3)).toBe(true);
    expect(nestedDeeperThan('text')).toBe(false);
    expect(nestedDeeperThan(null)).toBe(false);
  });
});

describe('illFormedStringPath', () => {
  it('finds a lone surrogate in a value or a key, in objects and arrays, and names its path', () => {
    expect(illFormedStringPath({ tenant: 'acme', ticket: { id: 'T-1', tags: ['a', 'b\ud800'] } })).toBe(
      'ticket.tags.1',
    );
    expect(illFormedStringPath({ ticket: { ['k\udc00']: 'v' } })).toBe('ticket.(key)');
    expect(illFormedStringPath('\ud800')).toBe('(body)');
    expect(illFormedStringPath([{ a: 'ok' }, { b: '\udfff' }])).toBe('1.b');
  });

  it('accepts well-formed text: pairs, other scripts, empty strings, numbers and nulls', () => {
    expect(illFormedStringPath({ a: '😀 ü 中', b: ['', 1, null, true], c: { '😀': 'x' } })).toBeUndefined();
    expect(illFormedStringPath(nested(MAX_BODY_DEPTH, 'deep 😀'))).toBeUndefined();
  });
});
