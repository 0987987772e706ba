import { describe, expect, it } from 'vitest';
import { runSpecSchema, unreadableSpecField } from '../../src/runs/spec.js';
import { unpackSpec } from '../../src/store/runRecord.js';

const failureOf = (fn: () => unknown): unknown => {
  try {
    fn();
  } catch (err) {
    return err;
  }
  throw new Error('did not throw');
};

describe('unreadableSpecField: where a stored spec fails to read', () => {
  it('names the form or the field, never a value', () => {
    expect(unreadableSpecField(failureOf(() => JSON.parse('{"v":2,')))).toBe('json');
    expect(unreadableSpecField(failureOf(() => runSpecSchema.parse({ v: 2, runId: 42 })))).toMatch(/^[\w.]+$/);
    const damaged = `~${Buffer.from('not deflate at all').toString('base64')}`;
    expect(unreadableSpecField(failureOf(() => unpackSpec(damaged)))).toBe('packed');
  });

  it('is undefined for any other failure (Redis, a bug): those are not the spec', () => {
    expect(unreadableSpecField(new Error('ECONNRESET'))).toBeUndefined();
    expect(unreadableSpecField(new TypeError('x is undefined'))).toBeUndefined();
  });
});
