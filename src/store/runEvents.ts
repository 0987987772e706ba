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
 *
 * An ended run's stream is compacted (src/runs/compact.ts, compactRun-5.lua): its entries (ids and fields) are packed
 * and compressed into one string beside it (`RunKeys.eventsPacked`, packEntries) and the stream is trimmed to no
 * entry (it keeps its last id, so an event appended later, an operator's action on the ended run, follows them).
 * A stream costs Redis 7 a 4 KB listpack node however few its entries; the packed string costs its bytes. Readers
 * read both in one MULTI (readEventsAfter), packed entries first: every event keeps its id, its place and its
 * payload, and a Last-Event-ID from before the compaction resumes as it did.
 */
import { behindMarker, dictionaryCodec } from '../core/dictionaryCodec.js';
import { fromLines, toLines } from '../core/lineList.js';
import { type RedisClient, transactionReplies } from './connect.js';

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

/**
 * A field list as Redis returns an entry's (name, value, name, value, ...): strings, or the bytes of the Buffer forms
 * (what a reader must use where a packed entry may be: its value is compressed bytes).
 */
export type StreamFields = readonly (string | Buffer)[];
/** Stream entries as XRANGE, XREVRANGE or one stream of XREAD return them (string or Buffer forms). */
export type StreamEntries = readonly (readonly [string | Buffer, StreamFields])[];

/**
 * The packed value's first byte: the rest is each entry's id, field count and fields one a line
 * (src/core/lineList.ts), compressed by PACKED_CODEC. Another codec or dictionary takes another marker value, never
 * this one.
 */
const PACKED_MARKER = 0x02;
/**
 * The first byte of events packed as the JSON of `[[entry id, [field, value, ...]], ...]` by EVENTS_CODEC: how they
 * were packed before lines, and how events are packed that have no line form.
 */
const PACKED_JSON_MARKER = 0x01;

/**
 * The preset dictionary of PACKED_JSON_MARKER values: how the engine's own events open (types and payload field names, nothing an agent names), so
 * a short stream finds its skeleton in the window. Changing it changes what PACKED_JSON_MARKER values mean.
 */
const EVENTS_DICTIONARY =
  '["type","operator_action","data","{\\"action\\":\\"cancel\\",\\"by\\":\\"\\"}"]' +
  '["type","text_delta","data","{\\"step\\":1,\\"text\\":\\"\\"}"]' +
  '["type","run_created","data","{\\"runId\\":\\"r_\\",\\"tenant\\":\\"\\"}"]]' +
  '["type","status_changed","data","{\\"status\\":\\"completed\\",\\"reason\\":\\"final_answer\\"}"]]' +
  '["type","effect","data","{\\"actionId\\":\\"a_\\",\\"from\\":\\"dispatched\\",\\"to\\":\\"confirmed\\"}"]]' +
  '["type","effect","data","{\\"actionId\\":\\"a_\\",\\"tool\\":\\"\\",\\"from\\":null,\\"to\\":\\"planned\\",\\"step\\":1}"]]' +
  '["type","step_started","data","{\\"step\\":1,\\"jobId\\":\\"r_.s1\\",\\"attempt\\":1,\\"startedAt\\":1,\\"worker\\":\\"worker:\\"}",' +
  '"type","decision","data","{\\"step\\":1,\\"tools\\":[\\"\\"],\\"final\\":false}",' +
  '"type","step_committed","data","{\\"step\\":1,\\"status\\":\\"running\\",\\"entries\\":2}"]]';
const EVENTS_CODEC = dictionaryCodec(EVENTS_DICTIONARY);
/**
 * The dictionary of PACKED_MARKER values: the same openings one field a line, at level 1 (src/core/lineList.ts says
 * why). Changing it changes what PACKED_MARKER values mean.
 */
const PACKED_CODEC = dictionaryCodec(
  [
    'type\noperator_action\ndata\n{"action":"cancel","by":""}',
    'type\ntext_delta\ndata\n{"step":1,"text":""}',
    'type\nrun_created\ndata\n{"runId":"r_","tenant":""}',
    'type\nstatus_changed\ndata\n{"status":"completed","reason":"final_answer"}',
    'type\neffect\ndata\n{"actionId":"a_","from":"dispatched","to":"confirmed"}',
    'type\neffect\ndata\n{"actionId":"a_","tool":"","from":null,"to":"planned","step":1}',
    '12\ntype\nstep_started\ndata\n{"step":1,"jobId":"r_.s1","attempt":1,"startedAt":1,"worker":"worker:"}',
    'type\ndecision\ndata\n{"step":1,"tools":[""],"final":false}',
    'type\nstep_committed\ndata\n{"step":1,"status":"running","entries":2}\n',
  ].join('\n'),
  1,
);

const text = (v: string | Buffer): string => (typeof v === 'string' ? v : v.toString('utf8'));

/** Entries (ids and fields, oldest first) as one packed value. */
export function packEntries(entries: StreamEntries): Buffer {
  const typed = entries.map(([id, raw]): [string, string[]] => [text(id), typeFields(raw.map(text))]);
  const lines = toLines(typed.flatMap(([id, fields]) => [id, String(fields.length), ...fields]));
  if (lines) return behindMarker(PACKED_MARKER, PACKED_CODEC.deflate(lines));
  return behindMarker(PACKED_JSON_MARKER, EVENTS_CODEC.deflate(Buffer.from(JSON.stringify(typed), 'utf8')));
}

/**
 * An entry's fields with a step's three events in one field (STEP_EVENTS_FIELD) written out as a type and a data
 * field each: packed entries hold every event so. The dictionaries know that form, and so does every release's
 * reader of packed events; the events and their ids are the same.
 */
function typeFields(fields: string[]): string[] {
  if (!fields.some((f, i) => i % 2 === 0 && f === STEP_EVENTS_FIELD)) return fields;
  const out: string[] = [];
  for (let i = 0; i + 1 < fields.length; i += 2) {
    if (fields[i] !== STEP_EVENTS_FIELD) out.push(fields[i]!, fields[i + 1]!);
    else splitStepEvents(fields[i + 1]!).forEach((data, j) => out.push('type', STEP_EVENT_TYPES[j]!, 'data', data));
  }
  return out;
}

/** The entries a packed value holds (none for an absent one), oldest first. */
export function unpackEntries(packed: Buffer | null | undefined): [string, string[]][] {
  if (!packed || packed.length === 0) return [];
  if (packed[0] === PACKED_JSON_MARKER)
    return JSON.parse(EVENTS_CODEC.inflate(packed.subarray(1)).toString('utf8')) as [string, string[]][];
  if (packed[0] !== PACKED_MARKER) throw new Error('packed run events have an unknown marker');
  const list = fromLines(PACKED_CODEC.inflate(packed.subarray(1)));
  const out: [string, string[]][] = [];
  for (let i = 0; i < list.length;) {
    const n = Number(list[i + 1]);
    if (!Number.isSafeInteger(n) || n < 0 || i + 2 + n > list.length)
      throw new Error('packed run events do not unpack');
    out.push([list[i]!, list.slice(i + 2, i + 2 + n)]);
    i += 2 + n;
  }
  return out;
}

/**
 * A run's events after `after`, in order: the packed ones, then up to `count` stream entries after the position, read
 * in one MULTI (a compaction between two reads would hide the entries it moves). `entries`: the stream entries read
 * (fewer than `count`: the stream has no more).
 */
export async function readEventsAfter(
  redis: RedisClient,
  k: { events: string; eventsPacked: string },
  after: EventPosition,
  count: number,
): Promise<{ events: RunEvent[]; entries: number }> {
  // Nothing follows the last id an entry can have, and Redis refuses it as an exclusive start.
  if (after.entry === LAST_ENTRY_ID && after.index === Infinity) return { events: [], entries: 0 };
  // Inside an entry, the entry itself is read again (inclusive start) for the events after the position.
  const start = after.index === Infinity ? `(${after.entry}` : after.entry;
  const [packed, page] = (await transactionReplies(
    redis.multi().getBuffer(k.eventsPacked).xrange(k.events, start, '+', 'COUNT', count),
    'run events read',
  )) as [Buffer | null, [string, string[]][]];
  const events = decodeEntries([...unpackEntries(packed), ...page]).filter((e) => isAfter(e, after));
  return { events, entries: page.length };
}

/** Every event of a run, in order (packed and streamed). */
export async function readAllEvents(
  redis: RedisClient,
  k: { events: string; eventsPacked: string },
): Promise<RunEvent[]> {
  const out: RunEvent[] = [];
  let after = STREAM_START;
  for (;;) {
    const { events, entries } = await readEventsAfter(redis, k, after, 500);
    out.push(...events);
    if (entries < 500 || events.length === 0) return out;
    after = { entry: events.at(-1)!.entry, index: Infinity };
  }
}

/**
 * The field holding a step's three events, their payloads joined by STEP_EVENTS_SEPARATOR
 * (lua/includes/emitEvents.lua, emitStepEvents): the commit of a step that stays running writes it.
 */
export const STEP_EVENTS_FIELD = 'step';
/** The record separator: JSON never holds a raw control character, so it cannot occur in a payload. */
export const STEP_EVENTS_SEPARATOR = '\x1e';
const STEP_EVENT_TYPES = ['step_started', 'decision', 'step_committed'] as const;

/** The payloads of a STEP_EVENTS_FIELD value, one per event (the last takes what is left if it holds more). */
export function splitStepEvents(value: string): string[] {
  const parts = value.split(STEP_EVENTS_SEPARATOR);
  return parts.length <= STEP_EVENT_TYPES.length
    ? parts
    : [
        ...parts.slice(0, STEP_EVENT_TYPES.length - 1),
        parts.slice(STEP_EVENT_TYPES.length - 1).join(STEP_EVENTS_SEPARATOR),
      ];
}

/**
 * The events of one stream entry, in order. An entry without a `type` field holds one event of type `message`; a
 * STEP_EVENTS_FIELD holds a step's three.
 */
export function decodeEntry(entry: string, raw: StreamFields): RunEvent[] {
  const fields = raw.map(text);
  const found: { type: string; data: string }[] = [];
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const name = fields[i]!;
    const value = fields[i + 1]!;
    if (name === STEP_EVENTS_FIELD)
      splitStepEvents(value).forEach((data, j) => found.push({ type: STEP_EVENT_TYPES[j]!, data }));
    else if (name === 'type') found.push({ type: value, data: '' });
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
export function decodeEntries(entries: StreamEntries): RunEvent[] {
  return entries.flatMap(([id, fields]) => decodeEntry(text(id), fields));
}

/**
 * An event id as a client gives it back: `<ms>-<seq>`, each part an unsigned 64-bit number as Redis holds a stream
 * entry id (at most 20 digits), then `.<index>` for an event of an entry holding several.
 */
const EVENT_ID = /^(\d{1,20})-(\d{1,20})(?:\.(\d{1,15}))?$/;
const MAX_ID_PART = 2n ** 64n - 1n;
/** The last id a stream entry can have: no entry follows it. */
const LAST_ENTRY_ID = `${MAX_ID_PART}-${MAX_ID_PART}`;

/**
 * The position an event id names (undefined when it is not one). Its entry id is one Redis takes (each part at most
 * 2^64-1: Redis refuses a larger one in XRANGE and XREAD), written without leading zeros.
 */
export function parseEventId(id: string): EventPosition | undefined {
  const m = EVENT_ID.exec(id);
  if (!m) return undefined;
  const ms = BigInt(m[1]!);
  const seq = BigInt(m[2]!);
  if (ms > MAX_ID_PART || seq > MAX_ID_PART) return undefined;
  return { entry: `${ms}-${seq}`, index: m[3] === undefined ? Infinity : Number(m[3]) };
}

/** An event kept by its id outside the stream (the archive's copy) as a reader holds it; undefined for a bad id. */
export function eventOfId(e: { id: string; type: string; data: string }): RunEvent | undefined {
  const at = parseEventId(e.id);
  return at && { id: e.id, type: e.type, data: e.data, entry: at.entry, index: at.index === Infinity ? 0 : at.index };
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
