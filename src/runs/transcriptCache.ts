/**
 * Per-worker cache of run transcripts for providers that send the whole
 * conversation to the model. Reads only the entries appended since the last
 * read (LRANGE from the cached length), so a step's Redis cost does not grow
 * with the transcript. Entries are immutable once written, so the cache can
 * only be behind, never wrong; it is bounded (LRU by insertion order).
 */
import type { RedisClient } from '../store/connect.js';
import { decodeEntry, type JournalEntry } from '../core/journal.js';

export class TranscriptCache {
  private readonly entries = new Map<string, JournalEntry[]>();

  constructor(private readonly maxRuns = 500) {}

  async load(redis: RedisClient, runId: string, journalKey: string): Promise<JournalEntry[]> {
    const have = this.entries.get(runId) ?? [];
    const fresh = await redis.lrange(journalKey, have.length, -1);
    const all = fresh.length === 0 ? have : have.concat(fresh.map((raw, i) => decodeEntry(raw, have.length + i)));
    this.entries.delete(runId);
    this.entries.set(runId, all);
    if (this.entries.size > this.maxRuns) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    return all;
  }

  forget(runId: string): void {
    this.entries.delete(runId);
  }
}
