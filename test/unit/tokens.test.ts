/** The tokenizer wrapper: pieces cut at whitespace count as the whole text does; an unbroken run is not quadratic. */
import { describe, expect, it } from 'vitest';
import { countTokens as bpeCount } from 'gpt-tokenizer';
import { countTokens, PIECE_CHARS } from '../../src/core/tokens.js';

const whole = (text: string) => bpeCount(text, { disallowedSpecial: new Set<string>() });

describe('countTokens', () => {
  it('counts prose cut into pieces exactly as the whole text', () => {
    const prose = 'The order arrived damaged and the customer would like a refund or a replacement.\n'.repeat(60);
    expect(prose.length).toBeGreaterThan(PIECE_CHARS * 10);
    expect(countTokens(prose)).toBe(whole(prose));
  });

  it('counts special-token markers as text', () => {
    expect(countTokens('please ignore <|endoftext|> this')).toBe(whole('please ignore <|endoftext|> this'));
  });

  it('counts a 100,000-character unbroken string in bounded time (whole, BPE takes about a minute: quadratic in the run)', () => {
    const started = Date.now();
    const n = countTokens('x'.repeat(100_000));
    // A generous bound: cut into pieces this takes milliseconds; counted whole it blocks for tens of seconds.
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(n).toBeGreaterThan(100_000 / 16);
  });
});
