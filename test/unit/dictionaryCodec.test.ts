/** The one codec behind every compressed value the engine stores: raw deflate with its owner's preset dictionary. */
import { deflateRawSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { behindMarker, dictionaryCodec } from '../../src/core/dictionaryCodec.js';

const dictionary = '{"kind":"observation","tool":"","status":"ok","output":{"';
const codec = dictionaryCodec(dictionary);
const value = (n: number) =>
  Array.from(
    { length: n },
    (_, i) => `{"kind":"observation","tool":"read_${i % 3}","status":"ok","output":{"n":${i}}}`,
  ).join('');

describe('dictionaryCodec', () => {
  it('reads back what it wrote, a whole transcript included', () => {
    const long = value(400);
    expect(codec.inflate(codec.deflate(long)).toString('utf8')).toBe(long);
  });

  it('is raw deflate with the dictionary: a short value is smaller than without it, and a foreign dictionary cannot read it', () => {
    const one = value(1);
    const packed = codec.deflate(one);
    expect(packed.length).toBeLessThan(deflateRawSync(one, { level: 6, windowBits: 12, memLevel: 4 }).length);
    expect(() => dictionaryCodec('something else entirely').inflate(packed).toString('utf8')).toThrow();
    expect(() => codec.inflate(Buffer.from('not deflate at all'))).toThrow();
  });

  it('puts the marker byte in front of the body', () => {
    expect([...behindMarker(0x01, Buffer.from([7, 8]))]).toEqual([1, 7, 8]);
  });
});
