/** Stream entries read back as events: packed entries expanded in order, event ids and positions. */
import { describe, expect, it } from 'vitest';
import { decodeEntries, decodeEntry, isAfter, parseEventId, STREAM_START } from '../../src/store/runEvents.js';

describe('run events from stream entries', () => {
  it('an entry of one event keeps the entry id; each event of a packed entry gets <entry>.<index>, in order', () => {
    const events = decodeEntries([
      ['5-0', ['type', 'run_created', 'data', '{"a":1}']],
      ['6-0', ['type', 'step_started', 'data', '{"s":1}', 'type', 'decision', 'data', '{"d":1}']],
    ]);
    expect(events.map((e) => [e.id, e.type, e.data])).toEqual([
      ['5-0', 'run_created', '{"a":1}'],
      ['6-0.0', 'step_started', '{"s":1}'],
      ['6-0.1', 'decision', '{"d":1}'],
    ]);
  });

  it("a step's events in one field expand into its three, in order, each with its own id", () => {
    const events = decodeEntries([['8-0', ['step', '{"s":1}\x1e{"d":1}\x1e{"c":1}']]]);
    expect(events.map((e) => [e.id, e.type, e.data])).toEqual([
      ['8-0.0', 'step_started', '{"s":1}'],
      ['8-0.1', 'decision', '{"d":1}'],
      ['8-0.2', 'step_committed', '{"c":1}'],
    ]);
  });

  it('an entry without a type is one message', () => {
    expect(decodeEntry('7-1', ['w', '1'])).toMatchObject([{ id: '7-1', type: 'message', data: '' }]);
    expect(decodeEntry('7-2', ['data', 'x'])).toMatchObject([{ id: '7-2', type: 'message', data: 'x' }]);
  });

  it('a position from an event id: a plain entry id is past the whole entry, <entry>.<i> past its event i', () => {
    const events = decodeEntries([
      ['9-0', ['type', 'a', 'data', '1']],
      ['10-0', ['type', 'b', 'data', '2', 'type', 'c', 'data', '3', 'type', 'd', 'data', '4']],
      ['10-1', ['type', 'e', 'data', '5']],
    ]);
    const after = (id: string) => events.filter((e) => isAfter(e, parseEventId(id)!)).map((e) => e.type);
    expect(events.filter((e) => isAfter(e, STREAM_START)).map((e) => e.type)).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(after('9-0')).toEqual(['b', 'c', 'd', 'e']);
    expect(after('10-0.0')).toEqual(['c', 'd', 'e']);
    expect(after('10-0.1')).toEqual(['d', 'e']);
    expect(after('10-0.2')).toEqual(['e']);
    expect(after('10-0')).toEqual(['e']);
    expect(after('10-1')).toEqual([]);
  });

  it('refuses what is not an event id', () => {
    for (const bad of ['abc', '10', '10-0.', '10-0.x', '10-0.1.2', '-1-0']) expect(parseEventId(bad)).toBeUndefined();
  });
});
