/**
 * The script calls' wire encoding (src/store/luaScripts.ts encodeCommand): byte for byte the RESP that ioredis
 * writes for the same arguments, whatever their characters, and each command a view of bytes never written again.
 */
import { describe, expect, it } from 'vitest';
import { encodeCommand } from '../../src/store/luaScripts.js';

type Arg = string | number | Buffer;

/** RESP as the protocol defines it: `*<n>` then `$<bytes>` + bytes per argument. */
function reference(name: string, args: Arg[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length + 1}\r\n`)];
  for (const a of [name, ...args]) {
    const b = Buffer.isBuffer(a) ? a : Buffer.from(String(a), 'utf8');
    parts.push(Buffer.from(`$${b.length}\r\n`), b, Buffer.from('\r\n'));
  }
  return Buffer.concat(parts);
}

describe('encodeCommand', () => {
  it('writes the RESP of strings of any UTF-8 width, numbers and Buffers', () => {
    const args: Arg[] = [
      'sha',
      23,
      '',
      'plain ascii key:{0}:run:r_1',
      'é'.repeat(5), // 5 code units, 10 bytes: the byte count needs one more digit than the length
      '€'.repeat(40), // 3 bytes each
      '😀 surrogate pairs 😀',
      '\ud800 lone surrogate',
      'x'.repeat(9),
      'y'.repeat(10),
      0,
      9,
      10,
      1796349647023,
      -5,
      1.5,
      Number.MAX_SAFE_INTEGER,
      Buffer.from([0, 13, 10, 255]),
      Buffer.alloc(0),
      JSON.stringify({ v: 1, kind: 'observation', output: { body: 'ünïcödé text' } }),
    ];
    expect(encodeCommand('evalsha', args).equals(reference('evalsha', args))).toBe(true);
  });

  it('a command is never overwritten by the next ones, across slabs, and one larger than a slab is whole', () => {
    const first = encodeCommand('evalsha', ['a', 'b'.repeat(1000), 1]);
    const copy = Buffer.from(first);
    const big = 'z'.repeat(200_000);
    for (let i = 0; i < 300; i++) encodeCommand('evalsha', [`key:${i}`, 'v'.repeat(500), i]);
    const huge = encodeCommand('evalsha', [big, '€'.repeat(30_000)]);
    expect(first.equals(copy)).toBe(true);
    expect(huge.equals(reference('evalsha', [big, '€'.repeat(30_000)]))).toBe(true);
  });
});
