/**
 * A run's event stream read back as events. A script that appends several
 * events in a row stores them in one stream entry (lua/includes/emitEvents.lua):
 * the entry's fields repeat `type <t> data <d>` once per event, in order. Every
 * reader of the stream expands entries here, so each event is seen once, in
 * order, whatever entry it shares.
 *
 * An event's id: the entry id alone when the entry holds one event (every entry
 * of a single-event script, and every entry written before events were packed),
 * `<entry id>.<index>` (index from 0) for each event of an entry holding
 * several. A position given back as a plain entry id means the whole entry was
 * seen; `<entry id>.<index>` means that event and those before it were.
 */

/** One run event as readers see it. */
export interface RunEvent {
  /** The event's own id (see above): the SSE id and what Last-Event-ID resumes from. */
  id: string;
  /** The stream entry holding it. */
  entry: string;
  /** Its place in that entry, from 0. */
  index: number;
  type: string;
  /** The payload (JSON as written); '' if the entry carried none. */
  data: string;
}

/** Where a reader stands: after event `index` of entry `entry` (Infinity: after the whole entry). */
export interface EventPosition {
  entry: string;
  index: number;
}

/** The stream's start: before every entry. */
export const STREAM_START: EventPosition = { entry: '0-0', index: Infinity };

/** A field list as Redis returns an entry's (name, value, name, value, ...). */
export type StreamFields = readonly string[];

/** The events of one stream entry, in order. An entry without a `type` field holds one event of type `message`. */
export function decodeEntry(entry: string, fields: StreamFields): RunEvent[] {
  const found: { type: string; data: string }[] = [];
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const name = fields[i]!;
    const value = fields[i + 1]!;
    if (name === 'type') found.push({ type: value, data: '' });
    else if (name === 'data') {
      const last = found.at(-1);
      if (last && last.data === '') last.data = value;
      else found.push({ type: 'message', data: value });
    }
  }
  if (found.length === 0) found.push({ type: 'message', data: '' });
  const packed = found.length > 1;
  return found.map((e, index) => ({ id: packed ? `${entry}.${index}` : entry, entry, index, ...e }));
}

/** The events of entries read with XRANGE, XREVRANGE or XREAD, in the entries' order. */
export function decodeEntries(entries: readonly (readonly [string, StreamFields])[]): RunEvent[] {
  return entries.flatMap(([id, fields]) => decodeEntry(id, fields));
}

const EVENT_ID = /^(\d+-\d+)(?:\.(\d+))?$/;

/** The position an event id names (undefined when it is not one). */
export function parseEventId(id: string): EventPosition | undefined {
  const m = EVENT_ID.exec(id);
  if (!m) return undefined;
  return { entry: m[1]!, index: m[2] === undefined ? Infinity : Number(m[2]) };
}

/** Stream entry ids compare as (ms, seq): negative, 0 or positive like a sort comparator. */
export function compareEntryIds(a: string, b: string): number {
  const [am, as] = a.split('-').map(Number) as [number, number];
  const [bm, bs] = b.split('-').map(Number) as [number, number];
  return am !== bm ? am - bm : as - bs;
}

/** True when `e` comes after position `p`. */
export function isAfter(e: RunEvent, p: EventPosition): boolean {
  const c = compareEntryIds(e.entry, p.entry);
  return c > 0 || (c === 0 && e.index > p.index);
}
