/**
 * An ended run's packed journal and packed events: one string a line (src/core/lineList.ts) behind their own marker,
 * the JSON array behind the earlier marker when a value holds a newline (and for values packed before lines), each
 * read back as the very strings packed.
 */
import { describe, expect, it } from 'vitest';
import { fromLines, toLines } from '../../src/core/lineList.js';
import {
  encodeEntry,
  JOURNAL_PACKED_JSON_MARKER,
  JOURNAL_PACKED_MARKER,
  JournalCorrupt,
  packJournal,
  unpackJournal,
  type JournalEntry,
} from '../../src/core/journal.js';
import { decodeEntries, packEntries, unpackEntries } from '../../src/store/runEvents.js';

const entries: string[] = [1, 2, 3]
  .flatMap((step): JournalEntry[] => [
    {
      v: 1,
      kind: 'decision',
      step,
      model: 'scripted',
      toolCalls: [{ id: `call_${step}_0`, name: 'read_ticket', args: {} }],
      usage: { promptTokens: 100, completionTokens: 10 },
      attempts: 1,
    },
    {
      v: 1,
      kind: 'observation',
      step,
      callId: `call_${step}_0`,
      tool: 'read_ticket',
      status: 'ok',
      output: { body: 'The mug was "shattered"\nwhen I opened the box: café ☕', lines: ['a\\nb'] },
    },
  ])
  .map(encodeEntry);

const events: [string, string[]][] = [
  ['5-0', ['type', 'run_created', 'data', '{"runId":"r_1","tenant":"acme"}']],
  ['6-0', ['type', 'step_started', 'data', '{"step":1}', 'type', 'decision', 'data', '{"step":1,"final":false}']],
  ['7-0', []],
  ['8-0', ['type', 'operator_action', 'data', '']],
];

describe('a list one string a line', () => {
  it('reads back the strings it was made of, empty ones included', () => {
    const list = ['{"a":"é"}', '', 'x y', '{"b":"\\n"}'];
    expect(fromLines(toLines(list)!)).toEqual(list);
  });

  it('has no line form for a string holding a newline, nor for an empty list', () => {
    expect(toLines(['a', 'b\nc'])).toBeUndefined();
    expect(toLines([])).toBeUndefined();
  });
});

describe('an ended run packed', () => {
  it('packs a journal one entry a line behind its marker, and reads back each entry as the same string', () => {
    const packed = packJournal(entries);
    expect(packed[0]).toBe(JOURNAL_PACKED_MARKER);
    expect(unpackJournal(packed)).toEqual(entries);
  });

  it('packs a journal with an entry holding a newline as the JSON array behind the earlier marker, read back the same', () => {
    const raw = [...entries, '{"v":1,"kind":"status","step":3,"status":"completed","reason":"a\nb"}'];
    const packed = packJournal(raw);
    expect(packed[0]).toBe(JOURNAL_PACKED_JSON_MARKER);
    expect(unpackJournal(packed)).toEqual(raw);
  });

  it('a packed journal that does not inflate, or names no form, is JournalCorrupt', () => {
    const packed = packJournal(entries);
    expect(() => unpackJournal(packed.subarray(0, 8))).toThrow(JournalCorrupt);
    expect(() => unpackJournal(Buffer.from([0x09, 1, 2, 3]))).toThrow(JournalCorrupt);
  });

  it('packs events one id, count or field a line, and reads back every entry with its id and fields', () => {
    const packed = packEntries(events);
    expect(packed[0]).toBe(0x02);
    expect(unpackEntries(packed)).toEqual(events);
  });

  it("packs a step's three events held in one field as a type and a data field each: the same events, the same ids", () => {
    const step = ['{"step":2}', '{"step":2,"tools":[]}', '{"step":2,"entries":2}'];
    const raw: [string, string[]][] = [...events, ['9-0', ['step', step.join('\x1e')]]];
    const packed = packEntries(raw);
    expect(packed[0]).toBe(0x02);
    const read = unpackEntries(packed);
    expect(read.at(-1)).toEqual([
      '9-0',
      [
        'type',
        'step_started',
        'data',
        step[0],
        'type',
        'decision',
        'data',
        step[1],
        'type',
        'step_committed',
        'data',
        step[2],
      ],
    ]);
    expect(decodeEntries(read)).toEqual(decodeEntries(raw));
    // A value that reads `step` is a value, not that field.
    const typed: [string, string[]][] = [['10-0', ['type', 'step', 'data', 'step']]];
    expect(unpackEntries(packEntries(typed))).toEqual(typed);
  });

  it('packs events with a field holding a newline as the JSON array behind the earlier marker, read back the same', () => {
    const raw: [string, string[]][] = [...events, ['9-0', ['type', 'operator_action', 'data', '{"detail":"a\nb"}']]];
    const packed = packEntries(raw);
    expect(packed[0]).toBe(0x01);
    expect(unpackEntries(packed)).toEqual(raw);
  });
});
