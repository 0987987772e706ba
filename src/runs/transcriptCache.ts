/**
 * Per-worker cache of run transcripts for providers that send the whole
 * conversation to the model. Reads only the entries appended since the last
 * read (LRANGE from the cached length), so a step's Redis cost does not grow
 * with the transcript.
 *
 * Entries are immutable once written, but a failover can take the last ones
 * back: the promoted replica may lack entries this worker read from the old
 * master, and the run then appends other entries in their place. A cache that
 * trusted its length would hand the model a history the store does not have
 * (seen in the failover campaign: a lost read step still in the cache, so the
 * model was asked as if one step further, and a run made its write twice).
 * So each read also fetches the entry at the cached end (same script call) and
 * reads the whole journal again when it differs from the one cached.
 *
 * Entries are read as bytes: one may be stored compressed (packEntry in src/core/journal.ts).
 */
import type { RedisClient } from '../store/connect.js';
import { decodeEntry, type JournalEntry } from '../core/journal.js';
import { journalAfter } from '../store/calls/journalAfter.js';

interface Cached {
  entries: JournalEntry[];
  /** The raw last entry, as the store had it when read. */
  last: Buffer;
}

export class TranscriptCache {
  private readonly entries = new Map<string, Cached>();
  /** Reads that found the store's journal different from the cache (a failover took entries back). */
  diverged = 0;

  constructor(private readonly maxRuns = 500) {}

  async load(redis: RedisClient, runId: string, journalKey: string): Promise<JournalEntry[]> {
    const have = this.entries.get(runId);
    const read = have ? await this.readAfter(redis, journalKey, have) : undefined;
    const fresh = read ?? { entries: [], raw: await redis.lrangeBuffer(journalKey, 0, -1) };
    const base = fresh.entries.length;
    const all =
      fresh.raw.length === 0 ? fresh.entries : [...fresh.entries, ...fresh.raw.map((r, i) => decodeEntry(r, base + i))];
    this.entries.delete(runId);
    if (all.length > 0) this.entries.set(runId, { entries: all, last: fresh.raw.at(-1) ?? have!.last });
    if (this.entries.size > this.maxRuns) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    return all;
  }

  /** The entries appended after the cached ones, or undefined when the store's entry at the cached end differs. */
  private async readAfter(
    redis: RedisClient,
    journalKey: string,
    have: Cached,
  ): Promise<{ entries: JournalEntry[]; raw: Buffer[] } | undefined> {
    const { last, after } = await journalAfter(redis, journalKey, have.entries.length);
    if (last !== null && last.equals(have.last)) return { entries: have.entries, raw: after };
    this.diverged++;
    return undefined;
  }

  forget(runId: string): void {
    this.entries.delete(runId);
  }
}
