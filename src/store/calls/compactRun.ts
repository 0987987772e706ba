/** Typed call of src/store/lua/compactRun-5.lua: an ended run's events, journal and spec stored packed. */
import type { RedisClient } from '../connect.js';
import type { RunKeys } from '../keys.js';
import { script } from '../luaScripts.js';

export interface CompactRunArgs {
  /** The run's finishedAt and erasedAt as read: the fence. */
  finishedAt: number;
  erasedAt: string | undefined;
  /**
   * The events as read (the stream's last entry id, '' none, and length; the packed string's sha1, '' none) and every
   * one of them packed; undefined leaves the events.
   */
  events?: { lastId: string; length: number; packedSha1: string; packed: Buffer } | undefined;
  /** The spec as read (its sha1) and its packed form; undefined leaves the spec. */
  spec?: { sha1: string; packed: string } | undefined;
  /**
   * The journal as read (the list's length; the packed string's sha1, '' none) and every entry of both packed;
   * undefined leaves the journal.
   */
  journal?: { length: number; packedSha1: string; packed: Buffer } | undefined;
}

/** True when compacted; false when the run changed since it was read (nothing written). */
export async function compactRunCall(redis: RedisClient, k: RunKeys, a: CompactRunArgs): Promise<boolean> {
  const res = await script(redis, 'compactRun')(
    k.run,
    k.events,
    k.eventsPacked,
    k.journal,
    k.journalPacked,
    String(a.finishedAt),
    a.erasedAt ?? '',
    a.events?.lastId ?? '',
    a.events?.length ?? 0,
    a.events?.packedSha1 ?? '',
    a.events?.packed ?? '',
    a.spec?.sha1 ?? '',
    a.spec?.packed ?? '',
    a.journal?.length ?? 0,
    a.journal?.packedSha1 ?? '',
    a.journal?.packed ?? '',
  );
  return res === 1;
}
