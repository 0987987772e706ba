/** Typed call of src/store/lua/readEndedRun-6.lua: what an ended run's compaction reads, in one atomic read. */
import type { RedisClient } from '../connect.js';
import type { RunKeys } from '../keys.js';
import { scriptBytes } from '../luaScripts.js';
import { ENDED_RUN_FIELDS } from '../runRecord.js';

export interface EndedRunRead {
  /** The values of ENDED_RUN_FIELDS (decodeEndedRun reads them). */
  fields: (string | null)[];
  /** The event stream's entries, oldest first (their ids and fields as text or as bytes). */
  entries: [string | Buffer, (string | Buffer)[]][];
  eventsPacked: Buffer | null;
  /** The keys of the run's action records. */
  actionKeys: string[];
  /** The journal list's entries as stored (JSON, or compressed behind a marker byte). */
  listed: Buffer[];
  journalPacked: Buffer | null;
}

export async function readEndedRun(redis: RedisClient, k: RunKeys): Promise<EndedRunRead> {
  const [fields, entries, eventsPacked, actionKeys, listed, journalPacked] = (await scriptBytes(redis, 'readEndedRun')(
    k.run,
    k.events,
    k.eventsPacked,
    k.actions,
    k.journal,
    k.journalPacked,
    ...ENDED_RUN_FIELDS,
  )) as [(Buffer | null)[], [Buffer, Buffer[]][], Buffer | null, Buffer[], Buffer[], Buffer | null];
  return {
    fields: fields.map((v) => (v === null ? null : v.toString('utf8'))),
    entries,
    eventsPacked,
    actionKeys: actionKeys.map((v) => v.toString('utf8')),
    listed,
    journalPacked,
  };
}
