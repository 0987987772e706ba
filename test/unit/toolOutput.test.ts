/** The output cap (src/core/toolOutput.ts): counted up to the cap only, the error in place of the output past it. */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { cappedOutput, confirmedOutput, jsonBytesOver } from '../../src/core/toolOutput.js';

describe('tool output cap', () => {
  it('an output within the cap passes as it is; past it, the error names the cap', () => {
    const small = { rows: [{ id: 'a', text: 'é'.repeat(10) }] };
    expect(cappedOutput({ maxOutputBytes: 1000 }, small)).toEqual({ ok: true, output: small });
    const big = { rows: Array.from({ length: 100 }, (_, i) => ({ id: i, text: 'x'.repeat(100) })) };
    expect(cappedOutput({ maxOutputBytes: 1000 }, big)).toMatchObject({
      ok: false,
      output: { error: 'output_too_large', limitBytes: 1000 },
    });
  });

  it('counts UTF-8 bytes of the JSON, and stops at the cap', () => {
    expect(jsonBytesOver('é'.repeat(6), 13)).toBe(Buffer.byteLength(JSON.stringify('é'.repeat(6))));
    expect(jsonBytesOver('é'.repeat(6), 14)).toBeUndefined();
    // 40 MB: counted as its length, never encoded.
    expect(jsonBytesOver({ body: 'x'.repeat(40_000_000) }, 262_144)).toBeGreaterThan(262_144);
  });

  it('a confirmed write past its cap keeps the receipt, not the output', () => {
    expect(confirmedOutput({ maxOutputBytes: 10 }, 'rc_1', { text: 'x'.repeat(100) })).toMatchObject({
      receipt: 'rc_1',
      error: 'output_too_large',
      limitBytes: 10,
    });
  });
});

describe('a string counted as JSON', () => {
  it('counts what JSON.stringify writes, escapes, controls and surrogates (paired and lone) included', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 40 }), (s) => {
        const n = Buffer.byteLength(JSON.stringify(s));
        expect(jsonBytesOver(s, n)).toBeUndefined();
        expect(jsonBytesOver(s, n - 1)).toBe(n);
        // A key counts as its JSON too (with its colon and a comma).
        expect(jsonBytesOver({ [s]: 1 }, n + 5)).toBeUndefined();
        expect(jsonBytesOver({ [s]: 1 }, n + 4)).toBe(n + 5);
      }),
    );
    const tricky = 'a"b\\c\n\u0001\ud83d\ude00\ud800';
    expect(jsonBytesOver(tricky, 0)).toBe(tricky.length); // past the room: its length
    expect(jsonBytesOver(tricky, 10)).toBe(Buffer.byteLength(JSON.stringify(tricky)));
  });
});
