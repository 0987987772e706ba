/**
 * Token counts for the budget's pre-flight estimate, with a real BPE tokenizer
 * (gpt-tokenizer, o200k_base: OpenAI's current encoding; other vendors'
 * tokenizers differ by some percent, which the completion cap's margin and the
 * after-call charge of the real usage absorb). Special-token markers in the
 * text (`<|endoftext|>`, e.g. quoted by a customer) are counted as text, never
 * refused. About 60 µs per 200-byte entry on this machine (bench/ has none yet).
 */
import { countTokens as bpeCount } from 'gpt-tokenizer';

const AS_TEXT = { disallowedSpecial: new Set<string>() };

export function countTokens(text: string): number {
  return text.length === 0 ? 0 : bpeCount(text, AS_TEXT);
}
