/**
 * The archive's escape of U+0000 (src/archive/pgText.ts): no NUL reaches PostgreSQL, every value reads back as it was
 * (strings, object keys, the escape character itself), and a text without NUL or U+FFFF is stored as it is.
 */
import { describe, expect, it } from 'vitest';
import { archiveJson, archiveText, fromArchiveJson, fromArchiveText } from '../../src/archive/pgText.js';

const samples = [
  '',
  'plain text, ünïcödé, 🙂',
  'a\u0000b',
  '\u0000',
  '\u0000\u0000',
  '\uffff',
  '\uffff0',
  '\uffff\u0000',
  '\u0000\uffff\uffff0',
  'a literal backslash-u: \\u0000',
];

describe('the archive text escape', () => {
  it('round-trips every string and never writes a NUL', () => {
    for (const s of samples) {
      const stored = archiveText(s);
      expect(stored).not.toContain('\u0000');
      expect(fromArchiveText(stored), JSON.stringify(s)).toBe(s);
    }
    // Different texts stay different once stored (a search value matches only its own).
    expect(new Set(samples.map(archiveText)).size).toBe(samples.length);
  });

  it('stores a text without NUL or U+FFFF as it is', () => {
    expect(archiveText('ada@example.com')).toBe('ada@example.com');
    const value = { body: 'The mug was shattered', n: 1, list: [true, null, 'x'] };
    expect(archiveJson(value)).toBe(JSON.stringify(value));
  });

  it('escapes strings and keys at any depth of a JSON value, and reads them back equal', () => {
    const value = {
      input: { body: 'before\u0000after', 'key\u0000': ['\uffff', { deep: '\u0000' }] },
      n: 3,
      nothing: null,
      literal: 'a\\u0000b',
    };
    const json = archiveJson(value);
    // No NUL and no JSON escape of one: PostgreSQL's jsonb takes it.
    expect(json).not.toContain('\u0000');
    expect(json).not.toMatch(/(^|[^\\])(\\\\)*\\u0000/);
    expect(fromArchiveJson(JSON.parse(json) as unknown)).toEqual(value);
    // A key named __proto__ stays an own key.
    const proto = JSON.parse('{"__proto__": "a\\u0000"}') as Record<string, unknown>;
    const back = fromArchiveJson(JSON.parse(archiveJson(proto)) as Record<string, unknown>);
    expect(Object.keys(back)).toEqual(['__proto__']);
    expect(Object.getOwnPropertyDescriptor(back, '__proto__')?.value).toBe('a\u0000');
  });
});
