/** The journal's stored form: JSON below the threshold, deflated behind a marker byte above it, both read back. */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  DEFLATE_MARKER,
  JOURNAL_COMPRESS_MIN_BYTES,
  JournalCorrupt,
  decodeEntry,
  encodeEntry,
  entryDigest,
  packEntry,
  unpackEntry,
  type JournalEntry,
} from '../../src/core/journal.js';

const prose = (n: number) =>
  Array.from({ length: n }, (_, i) => `Sentence ${i} of what the customer wrote, with an accent: café ${i % 7}.`).join(
    ' ',
  );

const observation = (output: unknown): JournalEntry => ({
  v: 1,
  kind: 'observation',
  step: 3,
  callId: 'call_3_0',
  tool: 'read_ticket',
  status: 'ok',
  output,
});

describe('journal codec', () => {
  it('keeps a short entry as its JSON string', () => {
    const json = encodeEntry(observation({ body: 'short' }));
    expect(json.length).toBeLessThan(JOURNAL_COMPRESS_MIN_BYTES);
    expect(packEntry(json)).toBe(json);
  });

  it('stores a long entry deflated behind the marker byte, and reads it back identically', () => {
    const entry = observation({ body: prose(20) });
    const json = encodeEntry(entry);
    const stored = packEntry(json);
    expect(Buffer.isBuffer(stored)).toBe(true);
    const bytes = stored as Buffer;
    expect(bytes[0]).toBe(DEFLATE_MARKER);
    expect(bytes.length).toBeLessThan(Buffer.byteLength(json) / 2);
    expect(unpackEntry(bytes, 0)).toBe(json);
    expect(decodeEntry(bytes, 0)).toEqual(entry);
    // Deterministic: the same entry packs to the same bytes (a decision's digest is of its stored form).
    expect(packEntry(json)).toEqual(bytes);
    expect(entryDigest(bytes)).toBe(createHash('sha1').update(bytes).digest('hex'));
  });

  it('reads an entry written before compression existed, as a string or as bytes', () => {
    const entry = observation({ body: prose(20) });
    const json = encodeEntry(entry);
    expect(decodeEntry(json, 0)).toEqual(entry);
    expect(decodeEntry(Buffer.from(json, 'utf8'), 0)).toEqual(entry);
    expect(entryDigest(Buffer.from(json, 'utf8'))).toBe(entryDigest(json));
  });

  it('a marked entry that does not inflate, or bytes that are not JSON, are JournalCorrupt', () => {
    expect(() => decodeEntry(Buffer.from([DEFLATE_MARKER, 0xff, 0x00, 0x12]), 4)).toThrow(JournalCorrupt);
    expect(() => decodeEntry(Buffer.from([0x02, 0x7b]), 5)).toThrow(JournalCorrupt);
  });
});
