/**
 * Token counts for the budget's pre-flight estimate, with a real BPE tokenizer
 * (gpt-tokenizer, o200k_base: OpenAI's current encoding; other vendors'
 * tokenizers differ by some percent, which the completion cap's margin and the
 * after-call charge of the real usage absorb). Special-token markers in the
 * text (`<|endoftext|>`, e.g. quoted by a customer) are counted as text, never
 * refused.
 *
 * Text is counted in pieces of at most PIECE_CHARS, cut before a space
 * after a word where there is one (o200k attaches a space to the word after it, so such a
 * cut leaves the count as it was). BPE merges within one pre-token cost time
 * quadratic in its length: a customer's 40,000-character unbroken string took
 * 9 s to count whole, blocking the worker's event loop (and its lock renewals);
 * cut into pieces it takes milliseconds and counts a token or so more per cut.
 */
import { countTokens as bpeCount } from 'gpt-tokenizer';

const AS_TEXT = { disallowedSpecial: new Set<string>() };
export const PIECE_CHARS = 256;

export function countTokens(text: string): number {
  if (text.length <= PIECE_CHARS) return text.length === 0 ? 0 : bpeCount(text, AS_TEXT);
  let n = 0;
  for (let start = 0; start < text.length;) {
    let end = Math.min(text.length, start + PIECE_CHARS);
    if (end < text.length) {
      const cut = lastWhitespace(text, start + 1, end);
      if (cut > 0) end = cut;
    }
    n += bpeCount(text.slice(start, end), AS_TEXT);
    start = end;
  }
  return n;
}

/**
 * Index of the last space in text[from, to] that follows a letter or digit (so the cut splits no run of spaces or
 * punctuation), or -1.
 */
function lastWhitespace(text: string, from: number, to: number): number {
  for (let i = to; i >= from; i--) {
    if (text.charCodeAt(i) === 32 && /[\p{L}\p{N}]/u.test(text[i - 1]!)) return i;
  }
  return -1;
}
