/**
 * A run's journal read by position, whichever form holds it. A run at work keeps its journal as a list, entry by entry
 * (src/core/journal.ts). An ended run's journal is packed (src/runs/compact.ts, compactRun-5.lua): every entry, as
 * JSON, compressed into one string beside the list (`RunKeys.journalPacked`, packJournal), the list deleted. An entry
 * appended later (an operator's action on the ended run) goes to the list again and follows the packed ones. Entry i
 * of the journal is packed entry i, or list entry i - (packed entries): readJournal reads both in one MULTI (a
 * compaction between two reads would hide the entries it moves), so the API's run view, the console, a replay, the
 * archive's snapshot, an erasure and a child's parent see the same entries at the same positions as before the
 * packing.
 *
 * The step path reads the list directly (the worker's LINDEX/LRANGE, the scripts' LLEN/LINDEX): only a run at work
 * has steps, and the one operation that puts an ended run back to work (retryRun-17.lua) unpacks its journal into the
 * list in the same atomic change (readPackedJournal gives it the entries and the fence).
 */
import { createHash } from 'node:crypto';
import { type RedisClient, transactionReplies } from './connect.js';
import { packEntry, type StoredEntry, unpackJournal } from '../core/journal.js';

/** The keys of one run's journal (RunKeys has both). */
export interface JournalKeys {
  journal: string;
  journalPacked: string;
}

/**
 * Entries `start`..`stop` of the run's journal (inclusive, negative from the end: LRANGE's indexes) in their stored
 * forms: a listed entry as Redis holds it, a packed one as its JSON. Read every entry with decodeEntry.
 */
export async function readJournal(redis: RedisClient, k: JournalKeys, start = 0, stop = -1): Promise<StoredEntry[]> {
  const first = await readBoth(redis, k, start, stop);
  if (first.packed === null) return first.listed;
  // Packed: positions count the packed entries first, so the whole list is needed to place them.
  const all = start === 0 && stop === -1 ? first : await readBoth(redis, k, 0, -1);
  return sliceLikeLrange([...unpackJournal(all.packed), ...all.listed], start, stop);
}

/** The entry at `index` (negative from the end), or undefined past either end. */
export async function readJournalEntry(
  redis: RedisClient,
  k: JournalKeys,
  index: number,
): Promise<StoredEntry | undefined> {
  return (await readJournal(redis, k, index, index))[0];
}

/**
 * An ended run's packed journal as a script that reopens the run needs it: the sha1 of the packed bytes read (its
 * fence: '' when there is none) and the entries in the form the list stores them (packEntry), oldest first.
 */
export async function readPackedJournal(
  redis: RedisClient,
  k: JournalKeys,
): Promise<{ sha1: string; entries: StoredEntry[] }> {
  const packed = await redis.getBuffer(k.journalPacked);
  if (!packed) return { sha1: '', entries: [] };
  return {
    sha1: createHash('sha1').update(packed).digest('hex'),
    entries: unpackJournal(packed).map(packEntry),
  };
}

async function readBoth(
  redis: RedisClient,
  k: JournalKeys,
  start: number,
  stop: number,
): Promise<{ packed: Buffer | null; listed: Buffer[] }> {
  const [packed, listed] = await transactionReplies(
    redis.multi().getBuffer(k.journalPacked).lrangeBuffer(k.journal, start, stop),
    'journal read',
  );
  return { packed: packed as Buffer | null, listed: listed as Buffer[] };
}

/** LRANGE's slice of `all`: inclusive indexes, negative ones from the end, clamped. */
function sliceLikeLrange<T>(all: readonly T[], start: number, stop: number): T[] {
  const n = all.length;
  const from = Math.max(0, start < 0 ? n + start : start);
  const to = Math.min(n - 1, stop < 0 ? n + stop : stop);
  return from > to ? [] : all.slice(from, to + 1);
}
