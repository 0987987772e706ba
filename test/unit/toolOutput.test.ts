/** The output cap (src/core/toolOutput.ts): counted up to the cap only, the error in place of the output past it. */
import { describe, expect, it } from 'vitest';
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
